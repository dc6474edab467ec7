import type { ProbeEvent, ProbeKind } from "../probes.js";

/** Upper bounds (seconds) of the probe latency histograms: per-token steps are milliseconds, prefill can be seconds. */
export const PROBE_LATENCY_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface HistogramSnapshot {
  /** Upper bounds, ascending. */
  bounds: readonly number[];
  /** counts[i]: observations <= bounds[i] (cumulative, as Prometheus buckets are). */
  counts: number[];
  sum: number;
  count: number;
}

export interface ProbeMetricsSnapshot {
  /** Calls seen (one `memory` event ends each). */
  calls: number;
  /** Generated tokens by the phase that produced them (the first of a sequence comes out of prefill). */
  tokens: { prefill: number; decode: number };
  /** Time from a call's start to each sequence's first token. */
  timeToFirstTokenSeconds: HistogramSnapshot;
  /** Time between consecutive tokens of a sequence. */
  interTokenSeconds: HistogramSnapshot;
  /** The last call's peak and still-held bytes, and the highest peak of any call. */
  memoryPeakBytes: number;
  memoryActiveBytes: number;
  memoryPeakBytesMax: number;
}

class LatencyHistogram {
  private readonly counts = PROBE_LATENCY_BUCKETS.map(() => 0);
  private sum = 0;
  private count = 0;

  observe(seconds: number): void {
    PROBE_LATENCY_BUCKETS.forEach((bound, i) => {
      if (seconds <= bound) this.counts[i]!++;
    });
    this.sum += seconds;
    this.count++;
  }

  snapshot(): HistogramSnapshot {
    return { bounds: PROBE_LATENCY_BUCKETS, counts: [...this.counts], sum: this.sum, count: this.count };
  }
}

/**
 * A sink that turns token and memory events into counters, latency histograms
 * and memory gauges; `snapshot()` reads them (the server renders them on
 * /metrics). Latencies come from the events' `elapsedMs`.
 */
export class ProbeMetrics {
  readonly kinds: ProbeKind[] = ["token", "memory"];
  private calls = 0;
  private readonly tokens = { prefill: 0, decode: 0 };
  private readonly ttft = new LatencyHistogram();
  private readonly interToken = new LatencyHistogram();
  /** Time of the last token of each sequence of the running call. */
  private readonly lastTokenMs = new Map<number, number>();
  private memory = { peak: 0, active: 0, peakMax: 0 };

  emit(event: ProbeEvent): void {
    if (event.kind === "memory") {
      this.calls++;
      const { peakBytes, activeBytes } = event.payload;
      this.memory = { peak: peakBytes, active: activeBytes, peakMax: Math.max(this.memory.peakMax, peakBytes) };
      this.lastTokenMs.clear();
      return;
    }
    if (event.kind !== "token") return;
    if (event.phase === "prefill" || event.phase === "decode") this.tokens[event.phase]++;
    if (event.elapsedMs === undefined) return;
    const sequence = event.sequence ?? 0;
    const last = this.lastTokenMs.get(sequence);
    if (event.step === 0) this.ttft.observe(event.elapsedMs / 1000);
    else if (last !== undefined) this.interToken.observe((event.elapsedMs - last) / 1000);
    this.lastTokenMs.set(sequence, event.elapsedMs);
  }

  snapshot(): ProbeMetricsSnapshot {
    return {
      calls: this.calls,
      tokens: { ...this.tokens },
      timeToFirstTokenSeconds: this.ttft.snapshot(),
      interTokenSeconds: this.interToken.snapshot(),
      memoryPeakBytes: this.memory.peak,
      memoryActiveBytes: this.memory.active,
      memoryPeakBytesMax: this.memory.peakMax,
    };
  }
}
