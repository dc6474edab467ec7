/**
 * Token types, as GGUF's `tokenizer.ggml.token_type` numbers them (llama.cpp's
 * llama_token_type): what a token means decides how it is matched in input
 * text and rendered on output.
 */
export enum GgufTokenType {
  Undefined = 0,
  Normal = 1,
  /** The unknown-token placeholder (`<unk>`). */
  Unknown = 2,
  /** Control tokens (`<s>`, `<|im_start|>`): matched in text only when parsing special tokens, hidden by `skipSpecialTokens`. */
  Control = 3,
  /** Added tokens that are plain text to the model (`<think>`): always matched whole, always rendered. */
  UserDefined = 4,
  Unused = 5,
  /** SentencePiece byte-fallback token `<0xNN>`. */
  Byte = 6,
}
