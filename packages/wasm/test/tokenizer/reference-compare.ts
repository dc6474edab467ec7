/**
 * Compares one of our tokenizers with @huggingface/tokenizers on the corpus:
 * ids with and without special tokens, and decoding (with and without
 * skipping special tokens) of the reference's own ids.
 */
import assert from "node:assert/strict";
import type { Tokenizer as ReferenceTokenizer } from "@huggingface/tokenizers";
import type { Tokenizer } from "../../src/tokenizer/index.js";

export function compareWithReference(
  ours: Tokenizer,
  reference: ReferenceTokenizer,
  corpus: readonly string[],
  label: string,
): void {
  for (const text of corpus) {
    const where = `${label} on ${JSON.stringify(text.slice(0, 60))}`;
    const expected = reference.encode(text).ids;
    assert.deepEqual(ours.encode(text), expected, `encode ${where}`);
    assert.deepEqual(
      ours.encode(text, { addSpecialTokens: false }),
      reference.encode(text, { add_special_tokens: false }).ids,
      `encode without special tokens ${where}`,
    );
    if (expected.length === 0) {
      assert.equal(ours.decode([]), "", `decode of no ids ${where}`);
      continue;
    }
    // No clean_up_tokenization_spaces: decoded text must be the exact
    // concatenation of token texts (what streaming yields).
    for (const skip of [false, true]) {
      assert.equal(
        ours.decode(expected, { skipSpecialTokens: skip }),
        reference.decode(expected, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }),
        `decode (skipSpecialTokens ${skip}) ${where}`,
      );
    }
  }
}

import { describe, it } from "node:test";
import { tokenizerFromGgufMetadata, tokenizerFromHfJson } from "../../src/tokenizer/index.js";
import { CORPUS, ggufMetadataFromTokenizerJson, referenceFiles, referenceTokenizer, type ReferenceName } from "./helpers.js";
import { parseGguf, writeGguf } from "@infer/formats";

export interface ReferenceModelCase {
  name: ReferenceName;
  /** How llama.cpp stores this vocabulary in GGUF. */
  ggufModel: "llama" | "gpt2";
  ggufPre?: string;
  /**
   * The tokenizer.json applies NFC, which llama.cpp does not: the GGUF path
   * is compared on NFC text, where the two agree by construction.
   */
  nfc?: boolean;
}

/** The shared suite: tokenizer.json path and GGUF path against @huggingface/tokenizers. */
export function describeReferenceModel(spec: ReferenceModelCase): void {
  describe(`${spec.name} tokenizer against @huggingface/tokenizers`, () => {
    const files = referenceFiles(spec.name);
    const reference = referenceTokenizer(files);

    it("tokenizer.json: same ids and text on the corpus", () => {
      // The JSON already parsed for the reference (loadHfTokenizer's file
      // reading is covered elsewhere; Gemma's file is 33 MB).
      const ours = tokenizerFromHfJson({ tokenizer: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig }, files.folder);
      compareWithReference(ours, reference, CORPUS, `${spec.name} tokenizer.json`);
    });

    it(`GGUF vocabulary (tokenizer.ggml.model ${spec.ggufModel}${spec.ggufPre ? `, pre ${spec.ggufPre}` : ""}): same ids and text`, () => {
      const metadata = ggufMetadataFromTokenizerJson(files, { model: spec.ggufModel, pre: spec.ggufPre });
      const gguf = parseGguf(writeGguf({ metadata }), `${spec.name}-vocab.gguf`);
      assert.equal(gguf.tensors.length, 0);
      const ours = tokenizerFromGgufMetadata(gguf.metadata, gguf.source);
      const corpus = spec.nfc ? CORPUS.map((text) => text.normalize("NFC")) : CORPUS;
      compareWithReference(ours, reference, corpus, `${spec.name} GGUF`);
    });
  });
}
