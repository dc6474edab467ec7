// Tokenizers and chat templates for @infer/wasm.
export { TokenKind } from "./types.js";
export type { ChatRenderOptions, DecodeOptions, EncodeOptions, Tokenizer, TokenStream } from "./types.js";
export { VocabTokenizer } from "./vocab-tokenizer.js";
export type { MergeRule, VocabularySpec } from "./vocab-tokenizer.js";
export { tokenizerFromGgufMetadata } from "./gguf-vocab.js";
export type { MetadataSource } from "./gguf-vocab.js";
export { tokenizerFromHfJson } from "./hf-tokenizer.js";
export type { HfTokenizerFiles } from "./hf-tokenizer.js";
export { loadGgufTokenizer, loadHfTokenizer, loadTokenizer } from "./load.js";
export { StreamDecoder, utf8Decode } from "./stream-decoder.js";
export { renderChat } from "./chat-template.js";
export type { RenderChatOptions } from "./chat-template.js";
export { BYTE_TO_CHAR, fromByteLevel, toByteLevel } from "./byte-level.js";
export { compileSplitPattern, preTokenizerForGguf, splitWords } from "./pretokenize.js";
