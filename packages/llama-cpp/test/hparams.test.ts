import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { isInferenceError } from "@infer/core";
import { type GgufHeader, GgufMetadata, type GgufValue, GgufValueType } from "@infer/formats";
import { readGgufHeader } from "@infer/formats/node";
import { assertHyperparameters } from "../src/hparams.js";
import { assertTensorShapes } from "../src/tensor-shapes.js";
import { assertVocabulary } from "../src/vocab-check.js";
import { skipWithoutStories, STORIES_GGUF } from "./fixtures.js";

const u32 = (value: number): GgufValue => ({ type: GgufValueType.UINT32, value });
const u32s = (...values: number[]): GgufValue => ({ type: GgufValueType.ARRAY, itemType: GgufValueType.UINT32, value: Uint32Array.from(values) });

// stories260K: llama, 5 layers, 8 heads, 4 KV heads, embedding 64, 512 tokens.
describe("hyperparameter and vocabulary rules, on stories260K's header with keys changed", { skip: skipWithoutStories }, () => {
  let stories: GgufHeader;
  before(async () => {
    stories = await readGgufHeader(STORIES_GGUF);
  });

  /** stories260K's header with `changes` applied (undefined removes a key). */
  function edited(changes: Record<string, GgufValue | undefined>): GgufHeader {
    const metadata = new GgufMetadata(stories.source);
    for (const [key, value] of stories.metadata) metadata.set(key, value);
    for (const [key, value] of Object.entries(changes)) {
      if (value === undefined) metadata.delete(key);
      else metadata.set(key, value);
    }
    return { ...stories, metadata };
  }
  const check = (header: GgufHeader) => {
    assertTensorShapes(header, "llama", assertHyperparameters(header, "llama"));
    assertVocabulary(header, "llama");
  };
  const refused = (changes: Record<string, GgufValue | undefined>, field: string, fragment: string) =>
    assert.throws(
      () => check(edited(changes)),
      (error: unknown) => {
        assert.ok(isInferenceError(error, "MODEL_FORMAT"), String(error));
        assert.equal(error.details.field, field);
        assert.ok(error.message.startsWith(`${STORIES_GGUF}: `) && error.message.includes(fragment), error.message);
        return true;
      },
    );

  test("the header as stored passes, and so do the per-layer array forms of its counts", () => {
    check(stories);
    check(edited({ "llama.attention.head_count": u32s(8, 8, 8, 8, 8), "llama.attention.head_count_kv": u32s(4, 4, 2, 8, 1) }));
    check(edited({ "llama.feed_forward_length": u32s(172, 172, 172, 172, 172) }));
  });

  test("per-layer counts: wrong length, a layer with attention but no heads, KV heads not dividing", () => {
    refused({ "llama.attention.head_count": u32s(8, 8, 8) }, "llama.attention.head_count", "3 values for 5 layers");
    refused({ "llama.attention.head_count": u32s(8, 8, 0, 8, 8) }, "llama.attention.head_count", "layer 2");
    refused({ "llama.attention.head_count_kv": u32s(4, 4, 4, 0, 4) }, "llama.attention.head_count_kv", "layer 3");
    refused({ "llama.attention.head_count_kv": u32(16) }, "llama.attention.head_count_kv", "16 does not divide");
  });

  test("sizes: block_count bounds, embedding not a multiple of the heads unless key_length is given", () => {
    refused({ "llama.block_count": u32(0) }, "llama.block_count", "from 1 to 512");
    refused({ "llama.block_count": undefined }, "llama.block_count", "missing");
    refused({ "llama.embedding_length": u32(60) }, "llama.embedding_length", "not a multiple");
    refused({ "llama.context_length": u32(0) }, "llama.context_length", "0");
  });

  test("head sizes, RoPE and tensor shapes as llama.cpp derives them", () => {
    check(edited({ "llama.rope.dimension_count": undefined, "llama.attention.key_length": u32(8), "llama.attention.value_length": u32(8) }));
    refused({ "llama.rope.dimension_count": u32(6) }, "llama.rope.dimension_count", "whole head of 8");
    refused({ "llama.rope.dimension_count": u32(7) }, "llama.rope.dimension_count", "even count from 2 to the head size 8");
    refused({ "llama.attention.value_length": u32(16) }, "llama.attention.value_length", "value head size of 16");
    refused({ "llama.attention.key_length": u32(16) }, "llama.attention.key_length", "value head size of 8");
    refused(
      { "llama.attention.key_length": u32(16), "llama.attention.value_length": u32(16), "llama.rope.dimension_count": u32(16) },
      "llama.attention.head_count",
      'tensor "blk.0.attn_q.weight" [64, 64]: llama.cpp expects [64, 128]',
    );
    refused({ "llama.feed_forward_length": u32(0) }, "llama.feed_forward_length", "is 0 for layer 0");
    refused({ "llama.feed_forward_length": u32s(172, 172, 0, 172, 172) }, "llama.feed_forward_length", "is 0 for layer 2");
    refused({ "llama.feed_forward_length": u32(344) }, "llama.feed_forward_length", "expects [64, 344]");
    refused({ "llama.attention.head_count_kv": u32(8) }, "llama.attention.head_count_kv", 'tensor "blk.0.attn_k.weight"');
  });

  test("experts and expert groups as llama.cpp asserts them", () => {
    check(edited({ "llama.expert_count": u32(8), "llama.expert_used_count": u32(2) }));
    refused({ "llama.expert_count": u32(4096), "llama.expert_used_count": u32(2) }, "llama.expert_count", "1024");
    refused({ "llama.expert_count": u32(8) }, "llama.expert_used_count", "is 0");
    refused({ "llama.expert_used_count": u32(2) }, "llama.expert_used_count", "exceeds");
    refused(
      { "llama.expert_count": u32(8), "llama.expert_used_count": u32(2), "llama.expert_group_count": u32(3) },
      "llama.expert_group_count",
      "does not divide",
    );
  });

  test("floats: rope base above 0, scale factors not negative, every float hyperparameter finite", () => {
    const f32 = (value: number): GgufValue => ({ type: GgufValueType.FLOAT32, value });
    refused({ "llama.rope.freq_base": f32(0) }, "llama.rope.freq_base", "above 0");
    refused({ "llama.rope.scaling.factor": f32(-2) }, "llama.rope.scaling.factor", "negative");
    refused({ "llama.attn_logit_softcapping": f32(Number.POSITIVE_INFINITY) }, "llama.attn_logit_softcapping", "Infinity");
    check(edited({ "llama.rope.freq_base": f32(500000), "llama.rope.scaling.type": { type: GgufValueType.STRING, value: "yarn" } }));
  });

  test("vocabulary: per-token arrays long enough and of llama.cpp's types, BOS/EOS inside it", () => {
    const scores = stories.metadata.get("tokenizer.ggml.scores") as { value: Float32Array };
    refused(
      { "tokenizer.ggml.scores": { type: GgufValueType.ARRAY, itemType: GgufValueType.FLOAT32, value: scores.value.subarray(0, 100) } },
      "tokenizer.ggml.scores",
      "100 items for a vocabulary of 512",
    );
    refused(
      { "tokenizer.ggml.token_type": { type: GgufValueType.ARRAY, itemType: GgufValueType.FLOAT32, value: new Float32Array(512) } },
      "tokenizer.ggml.token_type",
      "expected ARRAY of INT32",
    );
    refused({ "tokenizer.ggml.eos_token_id": u32(512) }, "tokenizer.ggml.eos_token_id", "outside the vocabulary");
    check(edited({ "tokenizer.ggml.bos_token_id": u32(2 ** 32 - 1) }));
  });
});
