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

test("with several stop strings the earliest in the text wins", () => {
  const stopper = new SequenceStopper({ stopStrings: ["zz", "b"] });
  const out = [tok(1, "a"), tok(2, "bzz")].flatMap((t) => stopper.push(t));
  assert.equal(out.map((t) => t.text).join(""), "a");
  assert.equal(stopper.done, "stop");
});

test("a stop string inside one token truncates that token's text and keeps its id", () => {
  const stopper = new SequenceStopper({ stopStrings: ["END"] });
  const out = stopper.push(tok(9, "abENDcd"));
  assert.deepEqual(out, [tok(9, "ab")]);
  assert.deepEqual(stopper.push(tok(10, "more")), [], "tokens after the end are dropped");
});

test("a stop string at the very start emits nothing", () => {
  const stopper = new SequenceStopper({ stopStrings: ["\n"] });
  assert.deepEqual(stopper.push(tok(1, "\nHello")), []);
  assert.equal(stopper.done, "stop");
});

test("overlapping prefixes: 'aab' is found in 'aaab' split as a|a|a|b", () => {
  const stopper = new SequenceStopper({ stopStrings: ["aab"] });
  const out = [tok(1, "a"), tok(2, "a"), tok(3, "a"), tok(4, "b")].flatMap((t) => stopper.push(t));
  assert.equal(out.map((t) => t.text).join(""), "a");
  assert.equal(stopper.done, "stop");
});

test("maxTokens releases held text; flush releases it at EOS", () => {
  const capped = new SequenceStopper({ stopStrings: ["END"], maxTokens: 2 });
  assert.deepEqual(capped.push(tok(1, "xE")), []);
  assert.deepEqual(capped.push(tok(2, "N")), [tok(1, "xE"), tok(2, "N")]);
  assert.equal(capped.done, "length");
  const open = new SequenceStopper({ stopStrings: ["END"] });
  assert.deepEqual(open.push(tok(1, "EN")), []);
  assert.deepEqual(open.flush(), [tok(1, "EN")]);
  assert.deepEqual(open.flush(), []);
});

test("no options: every token passes, never done", () => {
  const stopper = new SequenceStopper({});
  for (let i = 0; i < 100; i++) assert.deepEqual(stopper.push(tok(i, "x")), [tok(i, "x")]);
  assert.equal(stopper.done, undefined);
  const one = new SequenceStopper({ maxTokens: 1 });
  assert.deepEqual(one.push(tok(1, "a")), [tok(1, "a")]);
  assert.equal(one.done, "length");
  assert.deepEqual(one.push(tok(2, "b")), []);
});

test("non-ASCII stop strings and empty token texts", () => {
  const stopper = new SequenceStopper({ stopStrings: ["é!"] });
  const out = [tok(1, "caf"), tok(2, ""), tok(3, "é"), tok(4, "!")].flatMap((t) => stopper.push(t));
  assert.equal(out.map((t) => t.text).join(""), "caf");
});

/**
 * Against a direct model of streaming stops: after each token, if the text so
 * far contains a stop string, the output is the text before the earliest
 * occurrence; after maxTokens tokens the output is all text so far.
 */
test("random streams agree with a direct computation", () => {
  let state = 12345;
  const rand = (n: number) => (state = (state * 1103515245 + 12345) % 2 ** 31) % n;
  const pick = (len: number) => Array.from({ length: len }, () => "abc"[rand(3)]).join("");
  for (let trial = 0; trial < 2000; trial++) {
    const stops = Array.from({ length: 1 + rand(2) }, () => pick(1 + rand(3)));
    const maxTokens = rand(3) === 0 ? undefined : 1 + rand(10);
    const tokens = Array.from({ length: rand(12) }, (_, i) => tok(i, pick(rand(4))));

    let expectedText = "";
    let expectedDone: string | undefined;
    let sofar = "";
    for (const [i, t] of tokens.entries()) {
      sofar += t.text;
      const starts = stops.map((s) => sofar.indexOf(s)).filter((at) => at >= 0);
      if (starts.length) {
        expectedText = sofar.slice(0, Math.min(...starts));
        expectedDone = "stop";
        break;
      }
      if (maxTokens !== undefined && i + 1 >= maxTokens) {
        expectedText = sofar;
        expectedDone = "length";
        break;
      }
    }

    const stopper = new SequenceStopper({ stopStrings: stops, maxTokens });
    const out: string[] = [];
    for (const t of tokens) {
      out.push(...stopper.push(t).map((x) => x.text));
      if (stopper.done) break;
    }
    if (!stopper.done) {
      out.push(...stopper.flush().map((x) => x.text));
      expectedText = sofar;
    }
    const context = JSON.stringify({ stops, maxTokens, tokens: tokens.map((t) => t.text) });
    assert.equal(out.join(""), expectedText, context);
    assert.equal(stopper.done, expectedDone, context);
  }
});
