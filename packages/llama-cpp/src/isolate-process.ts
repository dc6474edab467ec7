import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { abortedError, closedError, type GenerateMetrics, InferenceError, type ModelInfo, type ProbeEvent, type ProbeKind } from "@infer/core";
import {
  type CallRequest,
  type ChildLoadOptions,
  type ChildMessage,
  fromPortableError,
  type ParentMessage,
} from "./isolate-protocol.js";

/** Beside this module both in dist/src and in dist/bundle (scripts/bundle.mjs bundles it as an entry of its own). */
const CHILD_MODULE = new URL("./isolate-child.js", import.meta.url);
/** How long a closing child may take to free its model before it is killed. */
const CLOSE_GRACE_MS = 5_000;

/**
 * One child process running one llama.cpp model (see isolate-child.ts). It
 * dies with everything in it: calls in flight then fail with `BACKEND_CRASHED`,
 * and the owner starts a new one. The process keeps this one's event loop
 * alive only while it loads or runs a call, as an in-process model would.
 */
export class LlamaCppProcess {
  private readonly calls = new Map<number, ChildCall>();
  private nextId = 0;
  private loading: { resolve: (info: ModelInfo) => void; reject: (error: InferenceError) => void } | undefined;
  private closing = false;
  private exited: Promise<void>;
  private alive_ = true;
  info!: ModelInfo;

  /** Starts a child and loads the model in it; load errors come back with their own code and message. */
  static async start(path: string, options: ChildLoadOptions): Promise<LlamaCppProcess> {
    const child = fork(fileURLToPath(CHILD_MODULE), [], {
      serialization: "advanced",
      // The child's stdout goes to stderr: a CLI's stdout carries generated text only.
      stdio: ["ignore", 2, 2, "ipc"],
      execArgv: [],
    });
    const started = new LlamaCppProcess(path, child);
    started.info = await new Promise<ModelInfo>((resolve, reject) => {
      started.loading = { resolve, reject };
      started.send({ type: "load", path, options });
    });
    started.loading = undefined;
    started.holdOpen();
    return started;
  }

  private constructor(
    private readonly path: string,
    private readonly child: ChildProcess,
  ) {
    child.on("message", (message: ChildMessage) => this.receive(message));
    // A failed send: the child is beyond reach, so it is ended and reported like a crash. One that never
    // started (or cannot be signalled) will not report an exit: it is reported dead here.
    child.on("error", () => {
      if (!child.kill("SIGKILL")) this.died(child.exitCode, child.signalCode);
    });
    this.exited = new Promise((resolve) => {
      child.on("exit", (code, signal) => {
        this.died(code, signal);
        resolve();
      });
    });
  }

  get alive(): boolean {
    return this.alive_;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Starts a call; `onProbe` receives the probe events the child emits for it. */
  call(request: CallRequest, probeKinds: ProbeKind[], onProbe: (event: ProbeEvent) => void, signal?: AbortSignal): ChildCall {
    const id = this.nextId++;
    const call = new ChildCall(id, (message) => this.send(message), onProbe, () => {
      this.calls.delete(id);
      this.holdOpen();
    });
    this.calls.set(id, call);
    this.holdOpen();
    call.watch(signal);
    if (!signal?.aborted) this.send({ type: "call", id, request, probeKinds });
    return call;
  }

  /** Asks the child to free its model and exit; kills it when it does not in time. */
  async close(): Promise<void> {
    if (!this.alive_) return;
    this.closing = true;
    this.send({ type: "close" });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), CLOSE_GRACE_MS)));
    if (await Promise.race([this.exited.then(() => false), late])) this.child.kill("SIGKILL");
    clearTimeout(timer);
    await this.exited;
  }

  private send(message: ParentMessage): void {
    if (!this.child.connected) return;
    // With a callback, a failed send is reported here instead of as an "error" event; the exit follows.
    this.child.send(message, (error) => {
      if (error) this.child.kill("SIGKILL");
    });
  }

  private receive(message: ChildMessage): void {
    if (message.type === "loaded") this.loading?.resolve(message.info);
    else if (message.type === "load-failed") {
      this.loading?.reject(fromPortableError(message.error));
      this.child.kill("SIGKILL");
    } else this.calls.get(message.id)?.deliver(message);
  }

  private died(code: number | null, signal: NodeJS.Signals | null): void {
    if (!this.alive_) return;
    this.alive_ = false;
    const how = signal !== null ? `signal ${signal}` : `exit code ${code}`;
    const crash = (when: string) =>
      new InferenceError("BACKEND_CRASHED", `the llama.cpp process of model '${this.path}' died (${how}) ${when}`, {
        details: { path: this.path, signal, exitCode: code },
      });
    this.loading?.reject(crash("while loading the model"));
    for (const call of this.calls.values()) {
      call.fail(this.closing ? closedError() : crash("during the call; the model restarts at its next call"));
    }
    this.calls.clear();
  }

  /** The child and its channel keep this process alive only while there is work in it. */
  private holdOpen(): void {
    const busy = this.loading !== undefined || this.calls.size > 0;
    const handles = [this.child, this.child.channel].filter((h) => h != null);
    for (const handle of handles) {
      if (busy) handle.ref();
      else handle.unref();
    }
  }
}

/** One call's messages, in order, as the parent's model reads them. */
export class ChildCall {
  private readonly inbox: ChildMessage[] = [];
  private waiter: { resolve: (message: ChildMessage) => void; reject: (error: InferenceError) => void } | undefined;
  private failure: InferenceError | undefined;
  private ended = false;
  private asked = false;
  private metrics: GenerateMetrics | undefined;
  private unwatch: (() => void) | undefined;

  constructor(
    readonly id: number,
    private readonly send: (message: ParentMessage) => void,
    private readonly onProbe: (event: ProbeEvent) => void,
    private readonly forget: () => void,
  ) {}

  /** The next message; throws the call's error (the child's, a crash, the abort). */
  receive(): Promise<ChildMessage> {
    const message = this.inbox.shift();
    if (message) return Promise.resolve(message);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /** A stream's next message: asks the child for one more token first, except for the first (the call asked). */
  pull(): Promise<ChildMessage> {
    if (this.asked && !this.ended && !this.failure) this.send({ type: "next", id: this.id });
    this.asked = true;
    return this.receive();
  }

  /**
   * Ends the call: stops the child's work if it runs on and, when `wait`,
   * waits for its last message (so the metrics are the call's). Returns the
   * metrics the child reported, when it did.
   */
  async finish(wait: boolean): Promise<GenerateMetrics | undefined> {
    this.unwatch?.();
    if (!this.ended && !this.failure) {
      this.send({ type: "stop", id: this.id });
      while (wait && !this.ended && !this.failure) await this.receive().catch(() => undefined);
    }
    this.forget();
    return this.metrics;
  }

  deliver(message: ChildMessage): void {
    if (message.type === "probe") return this.onProbe(message.event);
    if (message.type === "done" || message.type === "failed") {
      this.ended = true;
      this.metrics = message.metrics;
      if (message.type === "failed") return this.fail(fromPortableError(message.error));
    }
    if (this.waiter) {
      const { resolve } = this.waiter;
      this.waiter = undefined;
      resolve(message);
    } else this.inbox.push(message);
  }

  fail(error: InferenceError): void {
    this.failure ??= error;
    if (this.waiter) {
      const { reject } = this.waiter;
      this.waiter = undefined;
      reject(this.failure);
    }
  }

  /** An abort fails the call at once (the child is told to stop; it need not answer). */
  watch(signal: AbortSignal | undefined): void {
    if (!signal) return;
    const abort = () => {
      this.fail(abortedError(signal.reason));
      this.send({ type: "stop", id: this.id });
    };
    if (signal.aborted) return abort();
    signal.addEventListener("abort", abort, { once: true });
    this.unwatch = () => signal.removeEventListener("abort", abort);
  }
}
