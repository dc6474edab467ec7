import { test } from "node:test";
import assert from "node:assert/strict";
import { describeValue, isInferenceError, MAX_JSON_DEPTH, parseModelJson } from "@infer/core";

const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

test("parseModelJson parses JSON up to the depth bound and refuses deeper nesting as MODEL_FORMAT naming the source", () => {
  assert.deepEqual(parseModelJson('{"a":[1,{"b":2}]}', "config.json"), { a: [1, { b: 2 }] });
  assert.equal((parseModelJson(nested(MAX_JSON_DEPTH), "config.json") as unknown[]).length, 1);
  for (const depth of [MAX_JSON_DEPTH + 1, 100_000]) {
    assert.throws(
      () => parseModelJson(nested(depth), "dir/config.json"),
      (error: unknown) =>
        isInferenceError(error, "MODEL_FORMAT") && error.message.startsWith("dir/config.json: ") && error.message.includes(`${MAX_JSON_DEPTH} levels`),
    );
  }
  // Objects count as levels too, and a smaller bound can be asked for.
  assert.throws(() => parseModelJson('{"a":{"b":{}}}', "x.json", 2), (e: unknown) => isInferenceError(e, "MODEL_FORMAT"));
  assert.deepEqual(parseModelJson('{"a":{"b":{}}}', "x.json", 3), { a: { b: {} } });
});

test("brackets inside strings, escaped quotes included, are not nesting", () => {
  const text = JSON.stringify({ s: "[[[[{{{{ \\\" \" [[[[", t: ["]]]]"] });
  assert.deepEqual(parseModelJson(text, "x.json", 2), JSON.parse(text));
});

test("text that is not JSON is MODEL_FORMAT with the parser's reason", () => {
  for (const text of ["", "{", "[1,]", '{"a":1}}', "nan"]) {
    assert.throws(() => parseModelJson(text, "tok.json"), (e: unknown) => isInferenceError(e, "MODEL_FORMAT") && e.message.startsWith("tok.json: not valid JSON"));
  }
});

test("describeValue stays short and never walks into a value", () => {
  let deep: unknown = [];
  for (let i = 0; i < 200_000; i++) deep = [deep];
  assert.equal(describeValue(deep), "array of 1");
  assert.equal(describeValue("x".repeat(1000)).length, 60 + 3);
  assert.equal(describeValue(Infinity), "Infinity");
  assert.equal(describeValue(null), "null");
  assert.equal(describeValue({ a: 1 }), "object");
  assert.equal(describeValue("abc"), '"abc"');
});
