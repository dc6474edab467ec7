// A long-lived fuzzing child and the limits around it. The parent keeps the case in flight, so whatever
// the child does (answers, throws past its handlers, dies by a signal, runs past the time limit, grows past
// the memory limit) is attributed to that case. A dead or killed child is started again for the next case.
import { fork } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const CHILD = new URL("./child.mjs", import.meta.url).pathname;
const STDERR_TAIL = 2000;
const POLL_MS = 25;
/** Starting a backend (llama.cpp's runtime) is not a case: it gets its own, generous limit. */
const WARMUP_LIMIT_MS = 180_000;

const FIELDS = { VmHWM: /VmHWM:\s+(\d+) kB/, VmRSS: /VmRSS:\s+(\d+) kB/ };

/** A /proc/<pid>/status field in MiB (VmHWM: peak resident memory; VmRSS: now), or undefined once it is gone. */
function statusMiB(pid, field) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = FIELDS[field].exec(status);
    return match ? Number(match[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}
const peakMiB = (pid) => statusMiB(pid, "VmHWM");

/** Resets the peak so the next reading is this case's own (Linux: "5" clears VmHWM). */
function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch {
    // Without it, the peak covers earlier cases too: over-reports, never misses.
  }
}

export class FuzzWorker {
  /** options: backend, modelPath (the tiny model templates and requests run on), timeLimitMs, memoryLimitMiB. */
  constructor(options) {
    this.options = options;
    this.child = undefined;
    this.restarts = 0;
  }

  async start() {
    // "advanced": a case's files travel as bytes (structured clone), not as JSON arrays of numbers.
    const child = fork(CHILD, [], { silent: true, execArgv: [], serialization: "advanced" });
    this.child = child;
    this.stderr = "";
    child.stderr.on("data", (chunk) => {
      this.stderr = (this.stderr + chunk.toString("utf8")).slice(-STDERR_TAIL);
    });
    child.stdout.resume();
    child.on("exit", (code, signal) => {
      // A child killed on purpose (hang, memory) is no longer this.child: its exit is no finding.
      if (this.child !== child) return;
      this.child = undefined;
      this.onExit?.(code, signal);
    });
    let timer;
    const ready = await new Promise((resolve) => {
      timer = setTimeout(() => resolve({ message: "no answer" }), WARMUP_LIMIT_MS);
      child.once("message", (message) => resolve(message.error ?? true));
      this.onExit = () => resolve({ message: lastLines(this.stderr) });
      child.send({ type: "warmup", backend: this.options.backend, modelPath: this.options.modelPath });
    });
    clearTimeout(timer);
    this.onExit = undefined;
    if (ready !== true) {
      this.kill();
      const error = new Error(`the fuzz child for backend ${this.options.backend} did not start: ${ready.code ?? ""} ${ready.message}`);
      // A backend that cannot run here (no llama.cpp build for this machine) is no finding.
      error.unavailable = ready.code === "BACKEND_UNAVAILABLE";
      throw error;
    }
  }

  kill() {
    const child = this.child;
    this.child = undefined;
    if (child && child.exitCode === null) child.kill("SIGKILL");
  }

  /**
   * Runs one case: { dir, target: {kind, entry}, files?, base? } (files: a template's or request's files,
   * sent instead of read from dir; base: the model an adapter case loads with its adapter). Resolves with { outcome, code?, message?, ms, peakMiB }.
   */
  async run(fuzzCase) {
    if (!this.child) {
      if (this.started) this.restarts++;
      await this.start();
      this.started = true;
    }
    const child = this.child;
    const { timeLimitMs, memoryLimitMiB } = this.options;
    this.stderr = "";
    resetPeak(child.pid);
    // The limit is on what the case adds: a long-lived child carries heap from earlier cases.
    const baseline = statusMiB(child.pid, "VmRSS") ?? 0;
    const started = performance.now();
    return new Promise((resolve) => {
      let done = false;
      // `peak`: a reading just taken, if the caller has one.
      const finish = (result, killChild, peak = peakMiB(child.pid)) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        clearInterval(poll);
        child.off("message", onMessage);
        this.onExit = undefined;
        if (killChild) this.kill();
        resolve({ ms: performance.now() - started, peakMiB: peak, ...result });
      };
      const overMemory = (peak = peakMiB(child.pid)) => (peak !== undefined && peak - baseline > memoryLimitMiB ? peak - baseline : undefined);
      const overLimit = (grown) => ({ outcome: "memory", message: `peak RSS grew ${Math.round(grown)} MiB, over the ${memoryLimitMiB} MiB limit` });
      const onMessage = (message) => {
        if (message.type !== "result") return;
        const peak = peakMiB(child.pid);
        const grown = overMemory(peak);
        if (grown) finish(overLimit(grown), true, peak);
        else finish(message, false, peak);
      };
      const timer = setTimeout(
        () => finish({ outcome: "hang", message: `no answer within ${timeLimitMs} ms` }, true),
        timeLimitMs,
      );
      const poll = setInterval(() => {
        const grown = overMemory();
        if (grown) finish(overLimit(grown), true);
      }, POLL_MS);
      this.onExit = (code, signal) => {
        // Give the stderr pipe a moment: the abort message arrives after the exit event at times.
        setTimeout(() => {
          const why = signal ? `killed by ${signal}` : `exited with code ${code}`;
          finish({ outcome: "crash", message: `${why}: ${lastLines(this.stderr)}` }, false);
        }, 50);
      };
      child.on("message", onMessage);
      child.send({ type: "case", ...fuzzCase, backend: this.options.backend, modelPath: this.options.modelPath });
    });
  }

  stop() {
    this.kill();
  }
}

function lastLines(text) {
  return text.trim().split("\n").slice(-4).join(" | ").slice(-600);
}
