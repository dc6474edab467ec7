import { type GenerateMetrics, makeMetrics } from "@infer/core";
import type { ServerCounts } from "./chunks.js";

/** One request's tokens and times, measured here and refined by what the server reports. */
export class CallProgress {
  private generated = 0;
  private firstTokenAt: number | undefined;
  private server: ServerCounts = {};

  constructor(private readonly started: number) {}

  get generatedTokens(): number {
    return this.generated;
  }

  /** A token was handed on (those after a stop string or maxTokens are never read, so never counted). */
  token(): void {
    this.generated++;
    this.firstTokenAt ??= performance.now();
  }

  count(counts: ServerCounts): void {
    for (const [key, value] of Object.entries(counts) as [keyof ServerCounts, number | undefined][]) {
      if (value !== undefined) this.server[key] = value;
    }
  }

  metrics(): GenerateMetrics {
    const now = performance.now();
    const totalMs = now - this.started;
    const firstAt = this.firstTokenAt ?? now;
    const within = (ms: number) => Math.min(totalMs, Math.max(0, ms));
    return makeMetrics({
      promptTokens: this.server.promptTokens ?? 0,
      generatedTokens: this.generated,
      // The server's own times where it reports them, else what the client saw: up to the first token, and after.
      prefillMs: within(this.server.promptMs ?? firstAt - this.started),
      decodeMs: within(this.server.predictedMs ?? now - firstAt),
      totalMs,
    });
  }

  /** A batch's metrics: tokens summed, times of the slowest request (they ran together). */
  static sum(parts: CallProgress[]): GenerateMetrics {
    const each = parts.map((p) => p.metrics());
    const total = (key: "promptTokens" | "generatedTokens") => each.reduce((sum, m) => sum + m[key], 0);
    const longest = (key: "prefillMs" | "decodeMs" | "totalMs") => each.reduce((max, m) => Math.max(max, m[key]), 0);
    return makeMetrics({
      promptTokens: total("promptTokens"),
      generatedTokens: total("generatedTokens"),
      prefillMs: longest("prefillMs"),
      decodeMs: longest("decodeMs"),
      totalMs: longest("totalMs"),
    });
  }
}
