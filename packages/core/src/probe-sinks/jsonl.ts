import type { ProbeEvent, ProbeKind, ProbeSink } from "../probes.js";

/**
 * One event as a JSON line (no newline). Typed arrays (attention weights)
 * become plain number arrays; numbers JSON cannot hold (a masked logit's
 * -Infinity, NaN) become null, as JSON.stringify writes them.
 */
export function probeEventJson(event: ProbeEvent): string {
  return JSON.stringify(event, (_key, value: unknown) =>
    ArrayBuffer.isView(value) && !(value instanceof DataView) ? Array.from(value as Float32Array) : value,
  );
}

/**
 * A sink that records every event (or only `kinds`) as JSON Lines: `write`
 * receives each line with its newline. `@infer/core/node` has one that writes a file.
 */
export function jsonlRecorder(write: (line: string) => void, options: { kinds?: ProbeKind[] } = {}): ProbeSink {
  return { kinds: options.kinds, emit: (event) => write(`${probeEventJson(event)}\n`) };
}
