/**
 * Streaming detokenization. `decode(ids)` is defined as the UTF-8 decoding of
 * the concatenated token bytes (invalid or unfinished sequences become U+FFFD,
 * a leading BOM is kept), minus one leading space where the vocabulary asks.
 * The WHATWG UTF-8 decoder in streaming mode yields exactly the same text in
 * pieces: it holds back an unfinished character until the byte that
 * completes it arrives, so pushing tokens one by one and flushing at the end
 * concatenates to `decode(ids)`.
 */
import { decodeUtf8 } from "@infer/formats";
import type { DecodeOptions, TokenStream } from "./types.js";

/** Decodes UTF-8 the way every tokenizer here does: replacement characters, BOM kept. */
export function utf8Decode(bytes: Uint8Array): string {
  return decodeUtf8(new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }), bytes);
}

export interface TokenBytesSource {
  tokenBytes(id: number, options?: DecodeOptions): Uint8Array;
}

export interface StreamDecoderOptions extends DecodeOptions {
  /** Drop one space at the very start of the text, as `decode` does for SentencePiece vocabularies. */
  stripLeadingSpace?: boolean;
}

export class StreamDecoder implements TokenStream {
  private readonly decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  private atStart = true;

  constructor(
    private readonly tokens: TokenBytesSource,
    private readonly options: StreamDecoderOptions = {},
  ) {}

  push(id: number): string {
    return this.emit(decodeUtf8(this.decoder, this.tokens.tokenBytes(id, this.options), { stream: true }));
  }

  /** Ends the sequence; the decoder is ready for a new one afterwards. */
  flush(): string {
    const text = this.emit(this.decoder.decode());
    this.atStart = true;
    return text;
  }

  private emit(text: string): string {
    if (!this.atStart || text.length === 0) return text;
    this.atStart = false;
    return this.options.stripLeadingSpace && text.startsWith(" ") ? text.slice(1) : text;
  }
}
