/**
 * The live line of `infer train` on stderr: step, loss, eval loss, tokens/s,
 * ETA. On a terminal it redraws one line; otherwise it prints about twenty
 * lines a run (and every step with an eval), so logs stay short.
 */
import type { TrainProgress } from "@infer/core";
import { formatDuration } from "../format.js";

export class TrainProgressLine {
  private lastEval: number | undefined;
  private open = false;

  constructor(private readonly out: NodeJS.WritableStream & { isTTY?: boolean }) {}

  update(p: TrainProgress): void {
    if (p.evalLoss !== undefined) this.lastEval = p.evalLoss;
    const line = describe(p, this.lastEval);
    if (this.out.isTTY) {
      this.out.write(`\r\x1b[2K${line}`);
      this.open = true;
      return;
    }
    const every = Math.max(1, Math.floor(p.totalSteps / 20));
    if (p.step % every === 0 || p.step === p.totalSteps || p.evalLoss !== undefined) this.out.write(`${line}\n`);
  }

  finish(): void {
    if (this.open) this.out.write("\n");
    this.open = false;
  }
}

function describe(p: TrainProgress, evalLoss: number | undefined): string {
  const width = String(p.totalSteps).length;
  return [
    `step ${String(p.step).padStart(width)}/${p.totalSteps}`,
    `epoch ${p.epoch + 1}`,
    `loss ${p.loss.toFixed(4)}`,
    ...(evalLoss !== undefined ? [`eval ${evalLoss.toFixed(4)}`] : []),
    `lr ${p.learningRate.toExponential(2)}`,
    `${p.tokensPerSecond.toFixed(0)} tok/s`,
    `ETA ${formatDuration(p.etaSeconds)}`,
  ].join("  ");
}
