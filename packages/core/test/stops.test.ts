import assert from "node:assert/strict";
import { test } from "node:test";
import { SequenceStopper } from "../src/index.js";

const tok = (id: number, text: string) => ({ id, text });

test("a stop string spanning tokens is cut, the text before it emitted", () => {
  const stopper = new SequenceStopper({ stopStrings: ["END"] });
  const out = [tok(1, "hello "), tok(2, "wE"), tok(3, "N"), tok(4, "D!")].flatMap((t) => stopper.push(t));
  assert.equal(out.map((t) => t.text).join(""), "hello wE".slice(0, 7));
  assert.equal(stopper.done, "stop");
});

test("held text is released when it turns out not to be a stop string", () => {
  const stopper = new SequenceStopper({ stopStrings: ["END"] });
  const first = stopper.push(tok(1, "abcE"));
  assert.deepEqual(first, []);
  const second = stopper.push(tok(2, "x"));
  assert.deepEqual(second.map((t) => t.text), ["abcE", "x"]);
  assert.equal(stopper.done, undefined);
});

test("maxTokens ends the sequence with reason length", () => {
  const stopper = new SequenceStopper({ maxTokens: 2 });
  stopper.push(tok(1, "a"));
  assert.equal(stopper.done, undefined);
  stopper.push(tok(2, "b"));
  assert.equal(stopper.done, "length");
});
