export { jsonlRecorder, probeEventJson } from "./jsonl.js";
export { type HistogramSnapshot, PROBE_LATENCY_BUCKETS, ProbeMetrics, type ProbeMetricsSnapshot } from "./metrics.js";
export { type ProbeSpan, type SpanAttributes, type SpanSinkOptions, spanSink } from "./spans.js";
