/**
 * tokenizer.json pipeline variants that the four shipped tokenizers do not
 * use, made by editing a real tokenizer.json and compared with
 * @huggingface/tokenizers on the same corpus: Metaspace pre-tokenizers
 * (prepend_scheme "first" / "always", no split) and added tokens that strip
 * surrounding whitespace.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Tokenizer as ReferenceTokenizer } from "@huggingface/tokenizers";
import { tokenizerFromHfJson } from "../../src/tokenizer/index.js";
import { CORPUS, referenceFiles } from "./helpers.js";
import { compareWithReference } from "./reference-compare.js";

const EXTRA = [
  " starts with a space",
  "<s>after a special token, then </s> and more",
  "<s> spaced special",
  "word <|eot_id|> next",
  "two <|eot_id|><|eot_id|>   runs\n<|eot_id|>\n",
];

describe("tokenizer.json variants against @huggingface/tokenizers", () => {
  for (const scheme of ["first", "always"] as const) {
    it(`Metaspace pre-tokenizer, prepend_scheme "${scheme}", split false`, () => {
      const files = referenceFiles("llama2");
      const json = structuredClone(files.tokenizerJson);
      json.normalizer = null;
      json.pre_tokenizer = { type: "Metaspace", replacement: "▁", prepend_scheme: scheme, split: false };
      const config = { ...files.tokenizerConfig, legacy: false };
      const reference = new ReferenceTokenizer(json, config);
      const ours = tokenizerFromHfJson({ tokenizer: json, tokenizerConfig: config }, `llama2 Metaspace ${scheme}`);
      compareWithReference(ours, reference, [...CORPUS, ...EXTRA], `Metaspace ${scheme}`);
      // The schemes differ after a special token, and neither doubles a leading space.
      const after = ours.decode(ours.encode("<s>after", { addSpecialTokens: false }));
      assert.equal(after, scheme === "first" ? "<s>after" : "<s> after");
      assert.deepEqual(ours.encode(" x", { addSpecialTokens: false }), ours.encode("x", { addSpecialTokens: false }));
    });
  }

  it("added tokens with lstrip / rstrip swallow the whitespace beside them", () => {
    const files = referenceFiles("llama3");
    const json = structuredClone(files.tokenizerJson);
    for (const token of json.added_tokens as { content: string; lstrip: boolean; rstrip: boolean }[]) {
      if (token.content === "<|eot_id|>") {
        token.lstrip = true;
        token.rstrip = true;
      }
    }
    const reference = new ReferenceTokenizer(json, files.tokenizerConfig);
    const ours = tokenizerFromHfJson({ tokenizer: json, tokenizerConfig: files.tokenizerConfig }, "llama3 lstrip/rstrip");
    compareWithReference(ours, reference, EXTRA, "lstrip/rstrip");
    assert.equal(ours.decode(ours.encode("word <|eot_id|> next")), "word<|eot_id|>next");
  });

  it("added tokens that share a prefix, and a long one: the longest match wins, as in the reference", () => {
    const files = referenceFiles("llama3");
    const json = structuredClone(files.tokenizerJson);
    const added = json.added_tokens as { id: number; content: string }[];
    const next = Math.max(...added.map((token) => token.id)) + 1;
    const long = "x".repeat(4096);
    for (const [i, content] of ["<|eo", "<|eot_id|>!", long].entries()) {
      added.push({ id: next + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true } as never);
    }
    const reference = new ReferenceTokenizer(json, files.tokenizerConfig);
    const ours = tokenizerFromHfJson({ tokenizer: json, tokenizerConfig: files.tokenizerConfig }, "llama3 prefixes");
    const texts = ["a <|eo b", "<|eot_id|>! and <|eot_id|>!!", "<|eot_id|>", `${long}x ${long.slice(1)} <|eo${long}`];
    compareWithReference(ours, reference, [...EXTRA, ...texts], "shared prefixes");
    assert.deepEqual(ours.encode(`<|eot_id|>!${long}`, { addSpecialTokens: false }), [next + 1, next + 2]);
  });
});
