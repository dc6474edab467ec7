import assert from "node:assert/strict";
import { it } from "node:test";
import {
  abortedError,
  closedError,
  ERROR_CODES,
  InferenceError,
  isInferenceError,
  toInferenceError,
} from "../src/index.js";

it("InferenceError carries a code, details and a cause", () => {
  const cause = new Error("disk");
  const error = new InferenceError("MODEL_FORMAT", "model.gguf: bad magic", { cause, details: { path: "model.gguf" } });
  assert.ok(error instanceof Error);
  assert.equal(error.name, "InferenceError");
  assert.equal(error.code, "MODEL_FORMAT");
  assert.equal(error.cause, cause);
  assert.deepEqual(error.details, { path: "model.gguf" });
  assert.equal(String(error), "InferenceError [MODEL_FORMAT]: model.gguf: bad magic");
  assert.deepEqual(new InferenceError("INTERNAL", "x").details, {});
  assert.equal("cause" in new InferenceError("INTERNAL", "x"), false);
});

it("the error codes are unique and stable", () => {
  assert.equal(new Set(ERROR_CODES).size, ERROR_CODES.length);
  for (const code of ["BACKEND_NOT_FOUND", "INVALID_OPTION", "ABORTED", "CLOSED", "CONTEXT_OVERFLOW", "INTERNAL"]) {
    assert.ok((ERROR_CODES as readonly string[]).includes(code), code);
  }
});

it("isInferenceError checks the class and optionally the code", () => {
  const error = new InferenceError("CLOSED", "closed");
  assert.equal(isInferenceError(error), true);
  assert.equal(isInferenceError(error, "CLOSED"), true);
  assert.equal(isInferenceError(error, "ABORTED"), false);
  assert.equal(isInferenceError(new Error("x")), false);
  assert.equal(isInferenceError({ code: "CLOSED" }), false);
  assert.equal(isInferenceError(undefined), false);
});

it("toInferenceError keeps InferenceErrors and wraps anything else", () => {
  const original = new InferenceError("UNSUPPORTED", "no");
  assert.equal(toInferenceError(original, "INTERNAL"), original);
  const wrapped = toInferenceError(new TypeError("boom"), "MODEL_FORMAT", "reading tensors");
  assert.equal(wrapped.code, "MODEL_FORMAT");
  assert.equal(wrapped.message, "reading tensors: boom");
  assert.ok(wrapped.cause instanceof TypeError);
  const fromString = toInferenceError("plain");
  assert.equal(fromString.code, "INTERNAL");
  assert.equal(fromString.message, "plain");
});

it("abortedError and closedError", () => {
  assert.equal(abortedError().message, "the call was aborted");
  assert.equal(abortedError("timeout").message, "the call was aborted: timeout");
  assert.equal(abortedError(new Error("user")).message, "the call was aborted: user");
  assert.equal(abortedError().code, "ABORTED");
  assert.equal(closedError().code, "CLOSED");
  assert.match(closedError("server").message, /the server is closed/);
});
