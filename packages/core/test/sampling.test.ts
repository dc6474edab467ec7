import assert from "node:assert/strict";
import { test } from "node:test";
import { applyRepeatPenalty, argmax, Rng, sampleToken, scoreToken, topKIndices, type SamplerSettings } from "../src/sampling.js";

const settings = (over: Partial<SamplerSettings> = {}): SamplerSettings => ({
  temperature: 1,
  topK: 0,
  topP: 1,
  minP: 0,
  repeatPenalty: 1,
  repeatLastN: 64,
  ...over,
});

test("Rng: the same seed gives the same stream; known first values pin it across machines", () => {
  const a = new Rng(42);
  const b = new Rng(42);
  const first = Array.from({ length: 5 }, () => a.nextUint32());
  assert.deepEqual(first, Array.from({ length: 5 }, () => b.nextUint32()));
  assert.notDeepEqual(first, Array.from({ length: 5 }, () => new Rng(43).nextUint32()));
  for (const v of first) assert.ok(Number.isInteger(v) && v >= 0 && v < 2 ** 32);
  // Uniformity sanity: mean of many floats near 0.5.
  const r = new Rng(7);
  let sum = 0;
  for (let i = 0; i < 20000; i++) sum += r.nextFloat();
  assert.ok(Math.abs(sum / 20000 - 0.5) < 0.01);
});

test("temperature 0 is argmax; ties go to the lowest id", () => {
  const logits = Float32Array.from([0.1, 3, 3, -1]);
  assert.equal(sampleToken(logits, settings({ temperature: 0 }), new Rng(1)), 1);
  assert.equal(argmax([1, 5, 2]), 1);
});

test("temperature 0 hands the penalized logits to a given greedy pick, and only then", () => {
  const seen: number[][] = [];
  const pick = (logits: Float32Array) => {
    seen.push(Array.from(logits));
    return 3;
  };
  const logits = Float32Array.from([4, 1, -2, 0]);
  assert.equal(sampleToken(logits, settings({ temperature: 0, repeatPenalty: 2 }), new Rng(1), [0, 2], pick), 3);
  assert.deepEqual(seen, [[2, 1, -4, 0]], "the penalty is applied before the pick");
  sampleToken(Float32Array.from([4, 1, -2, 0]), settings({ temperature: 0.7 }), new Rng(1), [], pick);
  assert.equal(seen.length, 1, "sampling at a temperature does not use the greedy pick");
});

test("top-k keeps exactly the k best", () => {
  const logits = Float32Array.from([5, 1, 4, 2, 3]);
  assert.deepEqual(topKIndices(logits, 3), [0, 2, 4]);
  const seen = new Set<number>();
  const rng = new Rng(3);
  for (let i = 0; i < 500; i++) seen.add(sampleToken(Float32Array.from(logits), settings({ topK: 2 }), rng));
  assert.deepEqual([...seen].sort(), [0, 2]);
});

test("top-p keeps the smallest set reaching p", () => {
  // probabilities ~ [0.665, 0.245, 0.09]
  const logits = Float32Array.from([2, 1, 0]);
  const rng = new Rng(5);
  const seen = new Set<number>();
  for (let i = 0; i < 500; i++) seen.add(sampleToken(Float32Array.from(logits), settings({ topP: 0.8 }), rng));
  assert.deepEqual([...seen].sort(), [0, 1]);
});

test("min-p drops tokens below minP x the top probability", () => {
  const logits = Float32Array.from([0, Math.log(0.5), Math.log(0.05)]);
  const rng = new Rng(9);
  const seen = new Set<number>();
  for (let i = 0; i < 500; i++) seen.add(sampleToken(Float32Array.from(logits), settings({ minP: 0.1 }), rng));
  assert.deepEqual([...seen].sort(), [0, 1]);
});

test("sampling frequencies follow softmax(logits / T)", () => {
  const logits = [1, 0];
  const rng = new Rng(11);
  let zeros = 0;
  const n = 20000;
  for (let i = 0; i < n; i++) if (sampleToken(Float32Array.from(logits), settings({ temperature: 2 }), rng) === 0) zeros++;
  const expected = 1 / (1 + Math.exp(-0.5));
  assert.ok(Math.abs(zeros / n - expected) < 0.015, `${zeros / n} vs ${expected}`);
});

test("repeat penalty divides positive and multiplies negative logits of seen tokens", () => {
  const logits = Float32Array.from([2, -2, 1]);
  applyRepeatPenalty(logits, [0, 1, 0], 2);
  assert.deepEqual([...logits], [1, -4, 1]);
});

test("seeded sampling is deterministic", () => {
  const logits = Float32Array.from({ length: 100 }, (_, i) => Math.sin(i));
  const run = (seed: number) => {
    const rng = new Rng(seed);
    return Array.from({ length: 20 }, () => sampleToken(Float32Array.from(logits), settings({ topK: 40 }), rng));
  };
  assert.deepEqual(run(123), run(123));
});

test("top-k on ties: the k largest, best first, lower id first", () => {
  const rng = new Rng(3);
  for (let round = 0; round < 50; round++) {
    // Few distinct values, so ties are common.
    const values = Float32Array.from({ length: 40 }, () => Math.floor(rng.nextFloat() * 8));
    const k = 1 + Math.floor(rng.nextFloat() * 12);
    const reference = Array.from(values.keys())
      .sort((a, b) => values[b]! - values[a]! || a - b)
      .slice(0, k);
    assert.deepEqual(topKIndices(values, k), reference);
  }
  assert.deepEqual(topKIndices(Float32Array.of(1, 2), 5), [1, 0]);
});

test("scoreToken: log softmax of the chosen id and the best alternatives", () => {
  const logits = Float32Array.of(2, 0, 1, -1);
  const norm = Math.log(Math.exp(2) + 1 + Math.exp(1) + Math.exp(-1));
  const scored = scoreToken(logits, 2, 2, (id) => `t${id}`);
  assert.ok(Math.abs(scored.logprob! - (1 - norm)) < 1e-6);
  assert.deepEqual(
    scored.topLogprobs!.map((alt) => [alt.id, alt.text]),
    [
      [0, "t0"],
      [2, "t2"],
    ],
  );
  assert.ok(Math.abs(scored.topLogprobs![0]!.logprob - (2 - norm)) < 1e-6);
  assert.equal(scoreToken(logits, 0, 0, String).topLogprobs, undefined);
});
