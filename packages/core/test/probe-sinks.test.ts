import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  emitTrainingStep,
  isInferenceError,
  jsonlRecorder,
  PROBE_LATENCY_BUCKETS,
  ProbeBus,
  type ProbeEvent,
  ProbeMetrics,
  probeEventJson,
  type SpanAttributes,
  spanSink,
} from "../src/index.js";
import { jsonlFileRecorder } from "../src/node/index.js";

const token = (step: number, elapsedMs: number, sequence?: number): ProbeEvent => ({
  kind: "token",
  phase: step === 0 ? "prefill" : "decode",
  step,
  elapsedMs,
  ...(sequence === undefined ? {} : { sequence }),
  payload: { id: 10 + step, text: `t${step}`, position: 3 + step },
});
const memory = (elapsedMs: number, peakBytes: number, activeBytes: number): ProbeEvent => ({
  kind: "memory",
  phase: "decode",
  step: 2,
  elapsedMs,
  payload: { peakBytes, activeBytes },
});

describe("ProbeBus calls", () => {
  it("attach adds a sink that detaching removes; a call stamps elapsed time and the sequence", async () => {
    const bus = new ProbeBus(undefined);
    assert.equal(bus.active, false);
    const seen: ProbeEvent[] = [];
    const detach = bus.attach((event) => seen.push(event));
    assert.equal(bus.active, true);
    const call = bus.call();
    await new Promise((resolve) => setTimeout(resolve, 15));
    call.emit("token", "prefill", 0, { id: 1, text: "a", position: 0 }, 2);
    call.emit("token", "decode", 1, { id: 2, text: "b", position: 1 });
    detach();
    assert.equal(bus.active, false);
    call.emit("token", "decode", 2, { id: 3, text: "c", position: 2 });
    assert.equal(seen.length, 2);
    assert.equal(seen[0]!.sequence, 2);
    assert.equal("sequence" in seen[1]!, false, "single-stream events carry no sequence");
    assert.ok(seen[0]!.elapsedMs! >= 10, `elapsed ${seen[0]!.elapsedMs}`);
    assert.ok(seen[1]!.elapsedMs! >= seen[0]!.elapsedMs!);
  });

  it("emitTrainingStep emits a training event to sinks that want it and refuses a bad step", () => {
    const seen: ProbeEvent[] = [];
    const bus = new ProbeBus([{ kinds: ["training"], emit: (event) => seen.push(event) }]);
    const call = bus.call();
    emitTrainingStep(call, 0, { step: 41, loss: 2.5, learningRate: 1e-4 });
    emitTrainingStep(call, 1, { step: 42, loss: 2.25 });
    assert.deepEqual(
      seen.map((e) => [e.kind, e.phase, e.step, e.payload]),
      [
        ["training", "training", 0, { step: 41, loss: 2.5, learningRate: 1e-4 }],
        ["training", "training", 1, { step: 42, loss: 2.25 }],
      ],
    );
    assert.throws(
      () => emitTrainingStep(call, 2, { step: -1, loss: 1 }),
      (error: unknown) => isInferenceError(error, "INVALID_OPTION") && /step/.test((error as Error).message),
    );
    // Nobody listening for training: nothing is built or sent.
    const quiet: ProbeEvent[] = [];
    emitTrainingStep(new ProbeBus({ kinds: ["token"], emit: (e) => quiet.push(e) }).call(), 0, { step: 0, loss: 1 });
    assert.deepEqual(quiet, []);
  });
});

describe("JSONL recorder", () => {
  it("writes one parseable line per event; typed arrays become arrays, non-finite numbers null", () => {
    const lines: string[] = [];
    const sink = jsonlRecorder((line) => lines.push(line), { kinds: ["attention", "logits"] });
    const bus = new ProbeBus(sink);
    bus.emit({ kind: "attention", phase: "decode", step: 1, payload: { layer: 2, weights: [Float32Array.from([0.25, 0.75])] } });
    bus.emit(token(0, 1));
    bus.emit({ kind: "logits", phase: "prefill", step: 0, payload: { topIds: [4], topLogits: [-Infinity], entropy: 0, vocabSize: 8 } });
    assert.equal(lines.length, 2, "kinds filter the recorder");
    assert.ok(lines.every((line) => line.endsWith("\n") && !line.slice(0, -1).includes("\n")));
    assert.deepEqual(JSON.parse(lines[0]!), { kind: "attention", phase: "decode", step: 1, payload: { layer: 2, weights: [[0.25, 0.75]] } });
    assert.deepEqual(JSON.parse(lines[1]!).payload.topLogits, [null]);
    assert.equal(probeEventJson(token(1, 5, 3)), JSON.stringify(token(1, 5, 3)), "events without typed arrays are plain JSON");
  });

  it("the Node recorder appends lines to a file and reports a file it cannot write", async () => {
    const dir = await mkdtemp(join(tmpdir(), "infer-jsonl-"));
    try {
      const path = join(dir, "events.jsonl");
      const recorder = jsonlFileRecorder(path);
      const bus = new ProbeBus(recorder.sink);
      for (let step = 0; step < 3; step++) bus.emit(token(step, step * 10));
      await recorder.close();
      const lines = (await readFile(path, "utf8")).trimEnd().split("\n").map((l) => JSON.parse(l) as ProbeEvent);
      assert.deepEqual(lines, [token(0, 0), token(1, 10), token(2, 20)]);
      const broken = jsonlFileRecorder(join(dir, "no-such-folder", "events.jsonl"));
      new ProbeBus(broken.sink).emit(token(0, 0));
      await assert.rejects(broken.close(), (error: unknown) => isInferenceError(error, "INVALID_OPTION") && /no-such-folder/.test((error as Error).message));
      assert.throws(() => jsonlFileRecorder(""), (error: unknown) => isInferenceError(error, "INVALID_OPTION"));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("metrics sink", () => {
  it("counts tokens by phase and calls, times the first token and the gaps per sequence, keeps memory", () => {
    const metrics = new ProbeMetrics();
    const bus = new ProbeBus(metrics);
    // A batch of two sequences, interleaved, then a single stream.
    for (const event of [token(0, 200, 0), token(0, 300, 1), token(1, 210, 0), token(1, 330, 1), token(2, 250, 0), memory(400, 5000, 4000)]) {
      bus.emit(event);
    }
    bus.emit(token(0, 2, undefined));
    bus.emit(memory(3, 4500, 4100));
    const figures = metrics.snapshot();
    assert.equal(figures.calls, 2);
    assert.deepEqual(figures.tokens, { prefill: 3, decode: 3 });
    assert.equal(figures.timeToFirstTokenSeconds.count, 3);
    assert.ok(Math.abs(figures.timeToFirstTokenSeconds.sum - (0.2 + 0.3 + 0.002)) < 1e-12);
    // Gaps: 10 ms and 40 ms on sequence 0, 30 ms on sequence 1.
    assert.equal(figures.interTokenSeconds.count, 3);
    assert.ok(Math.abs(figures.interTokenSeconds.sum - 0.08) < 1e-12);
    const le = (bound: number) => figures.interTokenSeconds.counts[PROBE_LATENCY_BUCKETS.indexOf(bound)];
    assert.deepEqual([le(0.01), le(0.025), le(0.05)], [1, 1, 3], "buckets are cumulative");
    assert.deepEqual(
      [figures.memoryPeakBytes, figures.memoryActiveBytes, figures.memoryPeakBytesMax],
      [4500, 4100, 5000],
    );
  });
});

describe("span sink", () => {
  interface Recorded {
    name: string;
    attributes: SpanAttributes;
    events: { name: string; attributes?: SpanAttributes }[];
    ended: number;
  }
  const tracer = () => {
    const spans: Recorded[] = [];
    const startSpan = (name: string, attributes: SpanAttributes) => {
      const span: Recorded = { name, attributes: { ...attributes }, events: [], ended: 0 };
      spans.push(span);
      return {
        setAttribute: (key: string, value: string | number | boolean) => (span.attributes[key] = value),
        addEvent: (eventName: string, eventAttributes?: SpanAttributes) => span.events.push({ name: eventName, attributes: eventAttributes }),
        end: () => span.ended++,
      };
    };
    return { spans, startSpan };
  };

  it("makes one span per call with an event per token and the call's figures", () => {
    const { spans, startSpan } = tracer();
    const bus = new ProbeBus(spanSink({ startSpan, attributes: { "infer.model": "m" } }));
    for (const event of [token(0, 20, 0), token(0, 25, 1), token(1, 30, 0), memory(40, 900, 800), token(0, 5), memory(6, 700, 650)]) bus.emit(event);
    assert.equal(spans.length, 2);
    assert.deepEqual(
      spans.map((s) => s.ended),
      [1, 1],
    );
    assert.equal(spans[0]!.name, "infer.call");
    assert.deepEqual(spans[0]!.attributes, {
      "infer.model": "m",
      "infer.tokens": 3,
      "infer.sequences": 2,
      "infer.time_to_first_token_ms": 20,
      "infer.duration_ms": 40,
      "infer.memory.peak_bytes": 900,
      "infer.memory.active_bytes": 800,
    });
    assert.deepEqual(spans[0]!.events[2], {
      name: "infer.token",
      attributes: { "infer.token.id": 11, "infer.token.text": "t1", "infer.step": 1, "infer.sequence": 0, "infer.elapsed_ms": 30 },
    });
    assert.equal(spans[1]!.attributes["infer.tokens"], 1);
    assert.equal(spans[1]!.events.length, 1);
  });

  it("summary detail keeps the attributes and drops the token events", () => {
    const { spans, startSpan } = tracer();
    const bus = new ProbeBus(spanSink({ startSpan, name: "llm", detail: "summary" }));
    for (const event of [token(0, 1), token(1, 2), memory(3, 10, 9)]) bus.emit(event);
    assert.equal(spans[0]!.name, "llm");
    assert.deepEqual(spans[0]!.events, []);
    assert.equal(spans[0]!.attributes["infer.tokens"], 2);
  });
});
