import type { HistogramSnapshot, ProbeMetricsSnapshot } from "@infer/core";

/** Upper bounds (seconds) of the request latency histogram. */
const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

type Labels = Record<string, string>;

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`))}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

class Counter {
  private readonly values = new Map<string, number>();
  add(labels: Labels, by = 1): void {
    const key = labelText(labels);
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }
  lines(name: string): string[] {
    return [...this.values].map(([labels, value]) => `${name}${labels} ${value}`);
  }
}

class Histogram {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  observe(labels: Labels, value: number): void {
    const key = labelText(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { labels, counts: LATENCY_BUCKETS.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    LATENCY_BUCKETS.forEach((bound, i) => {
      if (value <= bound) s.counts[i]!++;
    });
    s.sum += value;
    s.count++;
  }
  lines(name: string): string[] {
    return [...this.series.values()].flatMap((s) => histogramLines(name, s.labels, { bounds: LATENCY_BUCKETS, ...s }));
  }
}

/** A histogram's series in Prometheus text; `counts` are cumulative. */
function histogramLines(name: string, labels: Labels, h: HistogramSnapshot): string[] {
  return [
    ...h.bounds.map((bound, i) => `${name}_bucket${labelText({ ...labels, le: String(bound) })} ${h.counts[i]}`),
    `${name}_bucket${labelText({ ...labels, le: "+Inf" })} ${h.count}`,
    `${name}_sum${labelText(labels)} ${h.sum}`,
    `${name}_count${labelText(labels)} ${h.count}`,
  ];
}

/** Per served model, the figures of the ProbeMetrics sink the server attached to it. */
export type ProbeFigures = { model: string; figures: ProbeMetricsSnapshot }[];

function probeBlocks(probes: ProbeFigures, block: Block): string[] {
  if (probes.length === 0) return [];
  const each = (name: string, line: (model: string, f: ProbeMetricsSnapshot) => string[]) =>
    probes.flatMap(({ model, figures }) => line(model, figures).map((rest) => `${name}${rest}`));
  const gauge = (pick: (f: ProbeMetricsSnapshot) => number) => (model: string, f: ProbeMetricsSnapshot) => [`${labelText({ model })} ${pick(f)}`];
  return [
    ...block("infer_model_calls_total", "counter", "Model calls (generations, batches, classifications), from probes.", each("infer_model_calls_total", gauge((f) => f.calls))),
    ...block(
      "infer_model_tokens_total",
      "counter",
      "Tokens the model generated, by phase (a sequence's first comes out of prefill), from probes.",
      each("infer_model_tokens_total", (model, f) => [
        `${labelText({ model, phase: "prefill" })} ${f.tokens.prefill}`,
        `${labelText({ model, phase: "decode" })} ${f.tokens.decode}`,
      ]),
    ),
    ...block(
      "infer_model_time_to_first_token_seconds",
      "histogram",
      "From a call's start to each sequence's first token, from probes.",
      probes.flatMap(({ model, figures }) => histogramLines("infer_model_time_to_first_token_seconds", { model }, figures.timeToFirstTokenSeconds)),
    ),
    ...block(
      "infer_model_inter_token_seconds",
      "histogram",
      "Between consecutive tokens of a sequence, from probes.",
      probes.flatMap(({ model, figures }) => histogramLines("infer_model_inter_token_seconds", { model }, figures.interTokenSeconds)),
    ),
    ...block("infer_model_memory_peak_bytes", "gauge", "Peak memory of the model's last call, from probes.", each("infer_model_memory_peak_bytes", gauge((f) => f.memoryPeakBytes))),
    ...block(
      "infer_model_memory_active_bytes",
      "gauge",
      "Memory the model held after its last call, from probes.",
      each("infer_model_memory_active_bytes", gauge((f) => f.memoryActiveBytes)),
    ),
  ];
}

/** What `process.memoryUsage()` answers, in bytes. */
export interface ProcessMemory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

type Block = (name: string, type: string, help: string, lines: string[]) => string[];

/** The process's memory under the names Prometheus' own Node client uses, so dashboards made for it work. */
function processBlocks(m: ProcessMemory, block: Block): string[] {
  return [
    ...block("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [`process_resident_memory_bytes ${m.rss}`]),
    ...block("nodejs_heap_size_total_bytes", "gauge", "V8 heap size in bytes.", [`nodejs_heap_size_total_bytes ${m.heapTotal}`]),
    ...block("nodejs_heap_size_used_bytes", "gauge", "V8 heap in use in bytes.", [`nodejs_heap_size_used_bytes ${m.heapUsed}`]),
    ...block("nodejs_external_memory_bytes", "gauge", "Memory of objects outside the V8 heap bound to JavaScript objects.", [`nodejs_external_memory_bytes ${m.external}`]),
    ...block("nodejs_array_buffers_bytes", "gauge", "Memory of ArrayBuffers and SharedArrayBuffers (WebAssembly memories among them).", [`nodejs_array_buffers_bytes ${m.arrayBuffers}`]),
  ];
}

/** The server's Prometheus metrics; gauges are read live from the queues when scraped. */
export class ServerMetrics {
  readonly requests = new Counter();
  readonly promptTokens = new Counter();
  /** Of those, the ones the model's prefix cache already held (`usage.prompt_tokens_details.cached_tokens`). */
  readonly cachedPromptTokens = new Counter();
  readonly completionTokens = new Counter();
  readonly latency = new Histogram();
  readonly batches = new Counter();
  readonly batchedRequests = new Counter();

  countBatch(model: string, size: number): void {
    this.batches.add({ model });
    this.batchedRequests.add({ model }, size);
  }

  /**
   * `memory` is the process's own (Node's `process.memoryUsage()`): resident set, V8 heap, and memory
   * outside the heap (array buffers, the models' WebAssembly memories), so growth can be told apart.
   */
  render(gauges: { model: string; queued: number; active: number }[], probes: ProbeFigures = [], memory?: ProcessMemory): string {
    const block = (name: string, type: string, help: string, lines: string[]) => [
      `# HELP ${name} ${help}`,
      `# TYPE ${name} ${type}`,
      ...lines,
    ];
    return [
      ...block("infer_requests_total", "counter", "HTTP requests by endpoint and status.", this.requests.lines("infer_requests_total")),
      ...block("infer_prompt_tokens_total", "counter", "Prompt tokens processed.", this.promptTokens.lines("infer_prompt_tokens_total")),
      ...block(
        "infer_prompt_cached_tokens_total",
        "counter",
        "Prompt tokens reused from the prefix cache instead of evaluated (part of infer_prompt_tokens_total).",
        this.cachedPromptTokens.lines("infer_prompt_cached_tokens_total"),
      ),
      ...block(
        "infer_completion_tokens_total",
        "counter",
        "Tokens generated.",
        this.completionTokens.lines("infer_completion_tokens_total"),
      ),
      ...block(
        "infer_request_duration_seconds",
        "histogram",
        "Request latency from arrival to the last byte.",
        this.latency.lines("infer_request_duration_seconds"),
      ),
      ...block("infer_batches_total", "counter", "batchGenerate calls run for completions.", this.batches.lines("infer_batches_total")),
      ...block(
        "infer_batched_requests_total",
        "counter",
        "Requests answered through those batches.",
        this.batchedRequests.lines("infer_batched_requests_total"),
      ),
      ...block("infer_queue_depth", "gauge", "Requests waiting for a slot.", gauges.map((g) => `infer_queue_depth${labelText({ model: g.model })} ${g.queued}`)),
      ...block(
        "infer_active_requests",
        "gauge",
        "Requests generating now.",
        gauges.map((g) => `infer_active_requests${labelText({ model: g.model })} ${g.active}`),
      ),
      ...probeBlocks(probes, block),
      ...(memory ? processBlocks(memory, block) : []),
      "",
    ].join("\n");
  }
}
