import type { ProbeEvent, ProbeKind, ProbeSink } from "../probes.js";

export type SpanAttributes = Record<string, string | number | boolean>;

/** What the sink needs of a tracing span; an OpenTelemetry `Span` has these methods. */
export interface ProbeSpan {
  setAttribute(key: string, value: string | number | boolean): unknown;
  addEvent(name: string, attributes?: SpanAttributes): unknown;
  end(): unknown;
}

export interface SpanSinkOptions {
  /** Starts a span; the app maps it to its tracer (e.g. `(name, attributes) => tracer.startSpan(name, { attributes })`). */
  startSpan(name: string, attributes: SpanAttributes): ProbeSpan;
  /** Span name (default "infer.call"). */
  name?: string;
  /** Attributes every span starts with (the model's name, say). */
  attributes?: SpanAttributes;
  /** "token" (default): a span event per generated token; "summary": the call's attributes only. */
  detail?: "token" | "summary";
}

/**
 * A sink that makes one span per model call: it starts at the call's first
 * event and ends at its `memory` event (every call's last), with the call's
 * figures as attributes and, unless `detail` is "summary", an event per token.
 * No tracing library is needed: `startSpan` is the app's bridge to its tracer.
 */
export function spanSink(options: SpanSinkOptions): ProbeSink {
  const kinds: ProbeKind[] = ["token", "memory"];
  let span: ProbeSpan | undefined;
  let tokens = 0;
  let firstTokenMs: number | undefined;
  const sequences = new Set<number>();
  const emit = (event: ProbeEvent) => {
    span ??= options.startSpan(options.name ?? "infer.call", { ...options.attributes });
    if (event.kind === "token") {
      tokens++;
      sequences.add(event.sequence ?? 0);
      if (event.step === 0 && event.elapsedMs !== undefined) firstTokenMs ??= event.elapsedMs;
      if (options.detail !== "summary") {
        span.addEvent("infer.token", {
          "infer.token.id": event.payload.id,
          "infer.token.text": event.payload.text,
          "infer.step": event.step,
          ...(event.sequence !== undefined ? { "infer.sequence": event.sequence } : {}),
          ...(event.elapsedMs !== undefined ? { "infer.elapsed_ms": event.elapsedMs } : {}),
        });
      }
      return;
    }
    if (event.kind !== "memory") return;
    span.setAttribute("infer.tokens", tokens);
    span.setAttribute("infer.sequences", sequences.size);
    if (firstTokenMs !== undefined) span.setAttribute("infer.time_to_first_token_ms", firstTokenMs);
    if (event.elapsedMs !== undefined) span.setAttribute("infer.duration_ms", event.elapsedMs);
    span.setAttribute("infer.memory.peak_bytes", event.payload.peakBytes);
    span.setAttribute("infer.memory.active_bytes", event.payload.activeBytes);
    span.end();
    span = undefined;
    tokens = 0;
    firstTokenMs = undefined;
    sequences.clear();
  };
  return { kinds, emit };
}
