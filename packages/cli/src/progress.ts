import type { DownloadProgress } from "@infer/hub";
import { formatBytes, formatDuration } from "./format.js";

/**
 * A download progress bar on stderr: bytes, rate and ETA. On a terminal it
 * redraws one line (at most 10 times a second); otherwise it prints one line
 * per file when that file is done, so logs stay readable.
 */
export class ProgressBar {
  private lastDraw = 0;
  private current: string | undefined;

  constructor(private readonly out: NodeJS.WritableStream & { isTTY?: boolean }) {}

  update(p: DownloadProgress & { index: number; count: number }): void {
    const finished = p.total !== undefined && p.received >= p.total;
    if (this.current !== undefined && this.current !== p.file) this.finish();
    this.current = p.file;
    const now = performance.now();
    if (!finished && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const line = describe(p);
    if (this.out.isTTY) this.out.write(`\r\x1b[2K${line}`);
    else if (finished) this.out.write(`${line}\n`);
    if (finished) {
      if (this.out.isTTY) this.out.write("\n");
      this.current = undefined;
    }
  }

  /** Ends a line left open by an interrupted file. */
  finish(): void {
    if (this.current !== undefined && this.out.isTTY) this.out.write("\n");
    this.current = undefined;
  }
}

function describe(p: DownloadProgress & { index: number; count: number }): string {
  const prefix = p.count > 1 ? `[${p.index + 1}/${p.count}] ` : "";
  const rate = `${formatBytes(Math.round(p.bytesPerSec))}/s`;
  if (p.total === undefined || p.total === 0) return `${prefix}${p.file} ${formatBytes(p.received)} ${rate}`;
  const fraction = Math.min(1, p.received / p.total);
  const width = 24;
  const filled = Math.round(fraction * width);
  const eta = p.bytesPerSec > 0 ? formatDuration((p.total - p.received) / p.bytesPerSec) : "?";
  const resumed = p.resumedFrom > 0 ? ` (resumed at ${formatBytes(p.resumedFrom)})` : "";
  return `${prefix}${p.file} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${formatBytes(p.received)}/${formatBytes(p.total)} ${rate} ETA ${eta}${resumed}`;
}
