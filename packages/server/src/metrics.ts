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
    const out: string[] = [];
    for (const s of this.series.values()) {
      LATENCY_BUCKETS.forEach((bound, i) => out.push(`${name}_bucket${labelText({ ...s.labels, le: String(bound) })} ${s.counts[i]}`));
      out.push(`${name}_bucket${labelText({ ...s.labels, le: "+Inf" })} ${s.count}`);
      out.push(`${name}_sum${labelText(s.labels)} ${s.sum}`);
      out.push(`${name}_count${labelText(s.labels)} ${s.count}`);
    }
    return out;
  }
}

/** The server's Prometheus metrics; gauges are read live from the queues when scraped. */
export class ServerMetrics {
  readonly requests = new Counter();
  readonly promptTokens = new Counter();
  readonly completionTokens = new Counter();
  readonly latency = new Histogram();
  readonly batches = new Counter();
  readonly batchedRequests = new Counter();

  countBatch(model: string, size: number): void {
    this.batches.add({ model });
    this.batchedRequests.add({ model }, size);
  }

  render(gauges: { model: string; queued: number; active: number }[]): string {
    const block = (name: string, type: string, help: string, lines: string[]) => [
      `# HELP ${name} ${help}`,
      `# TYPE ${name} ${type}`,
      ...lines,
    ];
    return [
      ...block("infer_requests_total", "counter", "HTTP requests by endpoint and status.", this.requests.lines("infer_requests_total")),
      ...block("infer_prompt_tokens_total", "counter", "Prompt tokens processed.", this.promptTokens.lines("infer_prompt_tokens_total")),
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
      "",
    ].join("\n");
  }
}
