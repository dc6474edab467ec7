import {
  type BatchGenerateOptions,
  type BatchPrompt,
  type BatchResult,
  capabilitiesOf,
  type CapabilityReport,
  type ClassifyOptions,
  type EmbeddingModel,
  type GenerateOptions,
  InferenceError,
  isEmbeddingModel,
  isInferenceError,
  type LoadOptions,
  type Message,
  type ModelInfo,
  type TextModel,
  type Token,
} from "@infer/core";
import { endpointOf, resolveRemoteOptions } from "./endpoint.js";
import { loadRemoteModel } from "./load.js";
import type { RemoteModel } from "./model.js";

export interface ReplicaOptions {
  /** How often each replica's GET /v1/models is asked whether it is up (default 2000 ms). */
  healthIntervalMs?: number;
  /** How long a health check may take before the replica counts as down (default 2000 ms). */
  healthTimeoutMs?: number;
}

export interface ReplicaStatus {
  url: string;
  healthy: boolean;
  inFlight: number;
}

interface Replica {
  readonly url: string;
  model?: RemoteModel;
  healthy: boolean;
  inFlight: number;
}

const DEFAULT_HEALTH_INTERVAL_MS = 2000;
const DEFAULT_HEALTH_TIMEOUT_MS = 2000;

/**
 * One model served by several servers (replicas of the same weights): each
 * call goes to the healthy replica with the fewest calls in flight. A replica
 * that cannot be reached is taken out and the call moves to the next one
 * (streams only before their first token, so no text is ever sent twice);
 * periodic health checks bring it back.
 */
export class ReplicatedModel implements TextModel {
  readonly backend = "remote";
  readonly capabilities: CapabilityReport;
  private readonly timer: ReturnType<typeof setInterval>;
  private last: TextModel;
  private lastError: Error | undefined;
  private closed = false;
  private turn = 0;

  private constructor(
    private readonly replicas: Replica[],
    private readonly options: LoadOptions,
    replicaOptions: ReplicaOptions,
    first: RemoteModel,
  ) {
    this.last = first;
    this.capabilities = capabilitiesOf(first);
    const interval = replicaOptions.healthIntervalMs ?? DEFAULT_HEALTH_INTERVAL_MS;
    const timeout = replicaOptions.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
    this.timer = setInterval(() => void this.checkHealth(timeout), interval);
    // Health checks alone should not keep a process alive.
    (this.timer as { unref?: () => void }).unref?.();
    if (isEmbeddingModel(first)) {
      const embed: EmbeddingModel["embed"] = (texts, o) => this.call((m) => (m as TextModel & EmbeddingModel).embed(texts, o));
      Object.assign(this, { embed });
    }
  }

  /** Loads the model from each URL; at least one must answer now, the others join once their health checks pass. */
  static async load(urls: string[], options: LoadOptions = {}, replicaOptions: ReplicaOptions = {}): Promise<ReplicatedModel> {
    if (urls.length === 0) throw new InferenceError("INVALID_OPTION", "a replicated model needs at least one server URL", { details: { option: "urls" } });
    // With replicas to move to, a call that cannot reach one moves on at once rather than retrying it.
    if (urls.length > 1) options = { ...options, remote: { maxRetries: 0, ...options.remote } };
    const replicas: Replica[] = urls.map((url) => ({ url, healthy: false, inFlight: 0 }));
    const loads = await Promise.allSettled(replicas.map((replica) => loadRemoteModel(replica.url, options)));
    loads.forEach((load, i) => {
      if (load.status === "fulfilled") Object.assign(replicas[i]!, { model: load.value, healthy: true });
    });
    const first = replicas.find((r) => r.model)?.model;
    if (!first) throw (loads[0] as PromiseRejectedResult).reason;
    const names = new Set(replicas.filter((r) => r.model).map((r) => r.model!.server.model));
    if (names.size > 1) {
      await Promise.all(replicas.map((r) => r.model?.close()));
      throw new InferenceError("INVALID_OPTION", `replicas must serve the same model; these serve ${[...names].join(", ")}`, { details: { urls } });
    }
    return new ReplicatedModel(replicas, options, replicaOptions, first);
  }

  get modelType(): string {
    return this.last.modelType;
  }

  /** Each replica's URL, whether it takes calls now, and its calls in flight. */
  status(): ReplicaStatus[] {
    return this.replicas.map(({ url, healthy, inFlight }) => ({ url, healthy: healthy && !this.closed, inFlight }));
  }

  generate(prompt: string, options?: GenerateOptions): AsyncIterable<Token> {
    return this.stream((m) => m.generate(prompt, options));
  }
  chat(messages: Message[], options?: GenerateOptions): AsyncIterable<Token> {
    return this.stream((m) => m.chat(messages, options));
  }
  generateText(prompt: string, options?: GenerateOptions) {
    return this.call((m) => m.generateText(prompt, options));
  }
  chatText(messages: Message[], options?: GenerateOptions) {
    return this.call((m) => m.chatText(messages, options));
  }
  classify(prompts: string[], options?: ClassifyOptions) {
    return this.call((m) => m.classify(prompts, options));
  }
  /**
   * A batch reports failures per prompt, so failing over is per prompt too:
   * the prompts that could not reach their replica and released no token yet
   * go to the next one; the others keep their results.
   */
  async batchGenerate(prompts: BatchPrompt[], options: BatchGenerateOptions = {}): Promise<BatchResult[]> {
    const results: BatchResult[] = [];
    const tried = new Set<Replica>();
    const released = new Set<number>();
    const finished = new Set<number>();
    const finish = (index: number, result: BatchResult) => {
      if (!finished.has(index)) options.onFinish?.(index, result);
      finished.add(index);
    };
    let pending = prompts.map((_, index) => index);
    for (;;) {
      const replica = this.pick(tried);
      tried.add(replica);
      const spare = () => this.replicas.some((r) => r.healthy && r.model && !tried.has(r) && r !== replica);
      const retriable = (index: number, result: BatchResult) => isInferenceError(result.error, "REMOTE_UNAVAILABLE") && !released.has(index);
      const batch = pending;
      replica.inFlight++;
      try {
        const out = await replica.model!.batchGenerate(
          batch.map((index) => prompts[index]!),
          {
            ...options,
            promptStopStrings: options.promptStopStrings && batch.map((index) => options.promptStopStrings![index]),
            onToken: (j, token) => {
              released.add(batch[j]!);
              options.onToken?.(batch[j]!, token);
            },
            onFinish: (j, result) => {
              if (!(retriable(batch[j]!, result) && spare())) finish(batch[j]!, result);
            },
          },
        );
        this.last = replica.model!;
        out.forEach((result, j) => (results[batch[j]!] = result));
        pending = batch.filter((index) => retriable(index, results[index]!));
        if (pending.length === 0) return results;
        replica.healthy = false;
        if (!spare()) {
          for (const index of pending) finish(index, results[index]!);
          return results;
        }
      } finally {
        replica.inFlight--;
      }
    }
  }
  info(): ModelInfo {
    return this.last.info();
  }
  metrics() {
    return this.last.metrics();
  }
  err(): Error | undefined {
    return this.lastError;
  }
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await Promise.all(this.replicas.map((r) => r.model?.close()));
  }
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The healthy replica with the fewest calls in flight; ties go round, so an idle fleet shares the load. */
  private pick(tried: Set<Replica>): Replica {
    if (this.closed) throw new InferenceError("CLOSED", "the model is closed");
    const ready = this.replicas.filter((r) => r.healthy && r.model && !tried.has(r));
    if (ready.length === 0) {
      throw new InferenceError("REMOTE_UNAVAILABLE", `no replica of this model is up (${this.replicas.map((r) => r.url).join(", ")})`, {
        details: { urls: this.replicas.map((r) => r.url) },
      });
    }
    const fewest = Math.min(...ready.map((r) => r.inFlight));
    const candidates = ready.filter((r) => r.inFlight === fewest);
    return candidates[this.turn++ % candidates.length]!;
  }

  /** Runs `work` on a replica, moving to the next while the failure is one of reaching the server. */
  private async call<T>(work: (model: TextModel) => Promise<T>): Promise<T> {
    const tried = new Set<Replica>();
    for (;;) {
      const replica = this.pick(tried);
      tried.add(replica);
      replica.inFlight++;
      try {
        const result = await work(replica.model!);
        this.last = replica.model!;
        this.lastError = undefined;
        return result;
      } catch (error) {
        if (this.failOver(replica, error, tried)) continue;
        this.lastError = error as Error;
        throw error;
      } finally {
        replica.inFlight--;
      }
    }
  }

  private async *stream(open: (model: TextModel) => AsyncIterable<Token>): AsyncGenerator<Token> {
    const tried = new Set<Replica>();
    for (;;) {
      const replica = this.pick(tried);
      tried.add(replica);
      replica.inFlight++;
      let sent = 0;
      try {
        for await (const token of open(replica.model!)) {
          sent++;
          yield token;
        }
        this.last = replica.model!;
        this.lastError = undefined;
        return;
      } catch (error) {
        if (sent === 0 && this.failOver(replica, error, tried)) continue;
        this.lastError = error as Error;
        throw error;
      } finally {
        replica.inFlight--;
      }
    }
  }

  /** Takes an unreachable replica out; true when another one is left to try. */
  private failOver(replica: Replica, error: unknown, tried: Set<Replica>): boolean {
    if (!isInferenceError(error, "REMOTE_UNAVAILABLE")) return false;
    replica.healthy = false;
    return this.replicas.some((r) => r.healthy && r.model && !tried.has(r));
  }

  private async checkHealth(timeoutMs: number): Promise<void> {
    const { headers } = resolveRemoteOptions(this.options.remote);
    await Promise.all(
      this.replicas.map(async (replica) => {
        const up = await fetch(`${endpointOf(replica.url).apiBase}/models`, { headers, signal: AbortSignal.timeout(timeoutMs) }).then(
          async (res) => (await res.arrayBuffer(), res.ok),
          () => false,
        );
        if (up && !replica.model && !this.closed) replica.model = await loadRemoteModel(replica.url, this.options).catch(() => undefined);
        replica.healthy = up && replica.model !== undefined;
      }),
    );
  }
}

/** `ReplicatedModel.load`: one model behind several server URLs. */
export function loadReplicas(urls: string[], options?: LoadOptions, replicaOptions?: ReplicaOptions): Promise<ReplicatedModel> {
  return ReplicatedModel.load(urls, options, replicaOptions);
}
