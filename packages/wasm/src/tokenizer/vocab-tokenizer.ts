/**
 * One tokenizer engine behind both vocabulary sources (GGUF metadata and
 * Hugging Face tokenizer.json). A `VocabularySpec` says which of the two
 * text models applies:
 *  - SentencePiece-style: spaces become "▁", symbols are characters, pieces
 *    missing from the vocabulary fall back to `<0xNN>` byte tokens;
 *  - byte-level BPE: text is cut into words by the pre-tokenizer regexes and
 *    written in GPT-2's byte alphabet before merging.
 * and how pairs merge: by the score of the merged piece (SentencePiece
 * `scores`) or by rank in a merges list.
 */
import { InferenceError, type Message } from "@infer/core";
import { PackedStrings } from "@infer/formats";
import { fromByteLevel, toByteLevel } from "./byte-level.js";
import { renderChat } from "./chat-template.js";
import { mergeSymbols, PairRankTable, type PairPriority } from "./merge.js";
import { splitWords } from "./pretokenize.js";
import { SpecialTokenMatcher, type AddedTokenRule } from "./special-tokens.js";
import { StreamDecoder, utf8Decode } from "./stream-decoder.js";
import { TokenTable } from "./token-table.js";
import {
  TokenKind,
  type ChatRenderOptions,
  type DecodeOptions,
  type EncodeOptions,
  type TokenStream,
  type Tokenizer,
} from "./types.js";

export type MergeRule =
  /** SentencePiece: a pair may merge when the joined text is a normal token; higher score first. */
  | { by: "score"; scores: ArrayLike<number> }
  /**
   * BPE: pairs in merge order, earlier first, as [left, right] or as a
   * "left right" line (split at the first space after the first character,
   * as llama.cpp reads tokenizer.ggml.merges; packed lines are split as bytes).
   */
  | { by: "rank"; merges: ReadonlyArray<readonly [string, string] | string> | PackedStrings; field?: string };

export interface VocabularySpec {
  /** File path or description, for messages. */
  source: string;
  /** Stored token text by id (packed as bytes when read from GGUF). */
  tokens: readonly string[] | PackedStrings;
  kinds: ArrayLike<TokenKind>;
  merge: MergeRule;
  /** Tokens are spelled in GPT-2's byte-level alphabet and text is pre-tokenized into words. */
  byteLevel: boolean;
  /** Byte-level only: word-splitting regexes (global, Unicode). */
  preTokenizer?: readonly RegExp[];
  /** Byte-level only: a word that is itself a token is emitted whole (llama.cpp ignore_merges). */
  ignoreMerges?: boolean;
  /** Byte-level only: prefix each text fragment with a space unless it starts with one (ByteLevel add_prefix_space). */
  byteLevelPrefixSpace?: boolean;
  /**
   * SentencePiece only: prefix text fragments with "▁" — each one at the start
   * or after a special token (add_space_prefix, the Prepend normalizer), or
   * only a fragment at the very start of the input ("first", Metaspace's
   * prepend_scheme "first").
   */
  addSpacePrefix?: boolean | "first";
  /** SentencePiece only: no prefix for a fragment that already starts with a space (Metaspace's rule). */
  spacePrefixUnlessSpace?: boolean;
  /** SentencePiece only: merge within words that each start at a "▁" (Metaspace with split). */
  splitAtSpaceMark?: boolean;
  /** Decoding drops one leading space (SentencePiece with a space prefix). */
  stripLeadingSpace?: boolean;
  /** Apply Unicode NFC to input text first (a tokenizer.json NFC normalizer). */
  nfc?: boolean;
  unkId?: number;
  bosId?: number;
  /** The EOS token `encode` appends when `addEos` (default: the first of `eosIds`). */
  eosId?: number;
  /** Every id that ends generation. */
  eosIds: readonly number[];
  addBos: boolean;
  addEos: boolean;
  chatTemplate?: string;
  /** Where the chat template came from (default: `source`), for messages. */
  chatTemplateSource?: string;
  bosText?: string;
  eosText?: string;
  /** Per-token matching flags from tokenizer.json added tokens (lstrip / rstrip). */
  addedTokenFlags?: ReadonlyMap<number, { lstrip: boolean; rstrip: boolean }>;
}

const utf8 = new TextEncoder();
const SPACE_MARK = "▁";
const BYTE_TOKEN = /^<0x([0-9A-Fa-f]{2})>$/;
/** Words longer than this are not cached (and long runs are rare in real text). */
const WORD_CACHE_MAX_LENGTH = 64;
const WORD_CACHE_ENTRIES = 20000;

export class VocabTokenizer implements Tokenizer {
  readonly source: string;
  readonly vocabSize: number;
  readonly bosId: number | undefined;
  readonly eosId: number | undefined;
  readonly eosIds: number[];
  readonly addBos: boolean;
  readonly addEos: boolean;
  readonly chatTemplate: string | undefined;

  /** The spec less its token and merge lists, which live on as `table` and `priority` alone. */
  private readonly spec: Omit<VocabularySpec, "tokens" | "merge">;
  private readonly table: TokenTable;
  /** Byte value -> `<0xNN>` token id (SentencePiece byte fallback). */
  private readonly byteTokens = new Int32Array(256).fill(-1);
  private readonly priority: PairPriority;
  private readonly eogSet: Set<number>;
  /** Bytes of the tokens decoded so far, by id (a Map: a generation touches a few hundred ids of a vocabulary). */
  private readonly pieceCache = new Map<number, Uint8Array>();
  private readonly wordCache = new Map<string, number[]>();
  private matchers: { all?: SpecialTokenMatcher; userDefinedOnly?: SpecialTokenMatcher } = {};

  constructor(spec: VocabularySpec) {
    const { tokens, merge, ...rest } = spec;
    this.spec = rest;
    this.source = spec.source;
    this.vocabSize = tokens.length;
    this.bosId = spec.bosId;
    this.eosId = spec.eosId ?? spec.eosIds[0];
    this.eosIds = [...new Set(this.eosId === undefined ? spec.eosIds : [this.eosId, ...spec.eosIds])];
    this.eogSet = new Set(this.eosIds);
    this.addBos = spec.addBos && spec.bosId !== undefined;
    this.addEos = spec.addEos && this.eosId !== undefined;
    this.chatTemplate = spec.chatTemplate;
    this.table = new TokenTable(tokens);

    for (let id = 0; id < this.vocabSize; id++) {
      if (spec.kinds[id] !== TokenKind.Byte) continue;
      const hex = BYTE_TOKEN.exec(this.table.text(id));
      if (hex) this.byteTokens[parseInt(hex[1]!, 16)] = id;
    }
    this.priority = this.makePriority(merge);
  }

  private makePriority(rule: MergeRule): PairPriority {
    if (rule.by === "score") {
      const { scores } = rule;
      const kinds = this.spec.kinds;
      // Only normal pieces are built by merging: control, byte and user-defined
      // pieces are never the result of SentencePiece merges.
      return (left, right) => {
        const id = this.table.id(left + right);
        if (id === undefined) return undefined;
        const kind = kinds[id];
        if (kind !== TokenKind.Normal && kind !== TokenKind.Undefined) return undefined;
        return -(scores[id] ?? 0);
      };
    }
    const table = new PairRankTable(rule.merges.length);
    if (rule.merges instanceof PackedStrings) this.addPackedMerges(table, rule.merges, rule.field);
    else rule.merges.forEach((merge, rank) => {
      let left: string;
      let right: string;
      if (typeof merge === "string") {
        const cut = merge.indexOf(" ", 1);
        if (cut < 0) {
          const field = rule.field ?? "merges";
          throw new InferenceError("MODEL_FORMAT", `${this.source}: ${field}[${rank}] ${JSON.stringify(merge)} is not "left right"`, {
            details: { source: this.source, field, index: rank },
          });
        }
        left = merge.slice(0, cut);
        right = merge.slice(cut + 1);
      } else {
        [left, right] = merge;
      }
      // A merge of pieces outside the vocabulary can never apply: symbols
      // are vocabulary pieces (or single characters, which merge only when
      // they are pieces themselves).
      const leftId = this.table.id(left);
      const rightId = this.table.id(right);
      if (leftId !== undefined && rightId !== undefined) table.add(leftId, rightId, rank);
    });
    return (left, right) => {
      const leftId = this.table.id(left);
      if (leftId === undefined) return undefined;
      const rightId = this.table.id(right);
      return rightId === undefined ? undefined : table.get(leftId, rightId);
    };
  }

  /**
   * Merge lines as bytes: split at the first space after the first
   * character (a space byte never occurs inside a multi-byte character, so
   * this is the split of the decoded line), both sides looked up as bytes.
   */
  private addPackedMerges(table: PairRankTable, merges: PackedStrings, field = "merges"): void {
    const { bytes, starts } = merges;
    for (let rank = 0; rank < merges.length; rank++) {
      const start = starts[rank]!;
      const end = starts[rank + 1]!;
      let cut = start + utf8CharLength(bytes[start]);
      while (cut < end && bytes[cut] !== 0x20) cut++;
      if (cut >= end) {
        throw new InferenceError("MODEL_FORMAT", `${this.source}: ${field}[${rank}] ${JSON.stringify(merges.get(rank))} is not "left right"`, {
          details: { source: this.source, field, index: rank },
        });
      }
      const leftId = this.table.idOfBytes(bytes, start, cut);
      const rightId = this.table.idOfBytes(bytes, cut + 1, end);
      if (leftId !== undefined && rightId !== undefined) table.add(leftId, rightId, rank);
    }
  }

  tokenText(id: number): string {
    this.checkId(id);
    return this.table.text(id);
  }

  tokenKind(id: number): TokenKind {
    this.checkId(id);
    return this.spec.kinds[id] ?? TokenKind.Normal;
  }

  isSpecial(id: number): boolean {
    const kind = this.tokenKind(id);
    return kind === TokenKind.Control || kind === TokenKind.Unknown;
  }

  isEndOfGeneration(id: number): boolean {
    return this.eogSet.has(id);
  }

  /** The id of a token by its stored text. */
  tokenId(text: string): number | undefined {
    return this.table.id(text);
  }

  private checkId(id: number): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
      throw new InferenceError("INVALID_OPTION", `${this.source}: token id ${id} is outside the vocabulary (size ${this.vocabSize})`, {
        details: { source: this.source, id, vocabSize: this.vocabSize },
      });
    }
  }

  // ---------------------------------------------------------------- encode

  encode(text: string, options: EncodeOptions = {}): number[] {
    const addSpecial = options.addSpecialTokens ?? true;
    const parseSpecial = options.parseSpecial ?? true;
    const input = this.spec.nfc ? text.normalize("NFC") : text;
    const out: number[] = [];
    if (addSpecial && this.addBos) out.push(this.bosId!);
    let afterSpecial = true;
    let atInputStart = true;
    for (const fragment of this.matcher(parseSpecial).split(input)) {
      if ("id" in fragment) {
        out.push(fragment.id);
        afterSpecial = true;
      } else if (this.spec.byteLevel) {
        this.encodeByteLevel(fragment.text, out);
      } else {
        const prefix = this.spec.addSpacePrefix === "first" ? atInputStart : this.spec.addSpacePrefix === true && afterSpecial;
        this.encodeSentencePiece(fragment.text, prefix, out);
        afterSpecial = false;
      }
      atInputStart = false;
    }
    if (addSpecial && this.addEos) out.push(this.eosId!);
    return out;
  }

  private matcher(parseSpecial: boolean): SpecialTokenMatcher {
    const key = parseSpecial ? "all" : "userDefinedOnly";
    let matcher = this.matchers[key];
    if (!matcher) {
      const rules: AddedTokenRule[] = [];
      const { kinds, addedTokenFlags } = this.spec;
      for (let id = 0; id < this.vocabSize; id++) {
        const kind = kinds[id];
        const special = kind === TokenKind.Control || kind === TokenKind.Unknown;
        if (kind === TokenKind.UserDefined || (parseSpecial && special)) {
          const flags = addedTokenFlags?.get(id);
          rules.push({ id, text: this.table.text(id), lstrip: flags?.lstrip, rstrip: flags?.rstrip });
        }
      }
      // Rules go in id order: of two tokens with one spelling the lower id wins.
      matcher = new SpecialTokenMatcher(rules);
      this.matchers[key] = matcher;
    }
    return matcher;
  }

  private encodeSentencePiece(text: string, spacePrefix: boolean, out: number[]): void {
    let escaped = text.replaceAll(" ", SPACE_MARK);
    if (spacePrefix && !(this.spec.spacePrefixUnlessSpace && escaped.startsWith(SPACE_MARK))) escaped = SPACE_MARK + escaped;
    if (this.spec.splitAtSpaceMark) {
      for (const word of escaped.split(/(?=▁)/u)) this.encodeSentencePieceWord(word, out);
    } else {
      this.encodeSentencePieceWord(escaped, out);
    }
  }

  private encodeSentencePieceWord(escaped: string, out: number[]): void {
    for (const piece of mergeSymbols(Array.from(escaped), this.priority)) {
      const id = this.table.id(piece);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      // Byte fallback, or one unknown token for the piece when the
      // vocabulary lacks byte tokens (Hugging Face's BPE rule).
      const bytes = Array.from(utf8.encode(piece), (byte) => this.byteTokens[byte]!);
      if (bytes.every((byteId) => byteId >= 0)) out.push(...bytes);
      else if (this.spec.unkId !== undefined) out.push(this.spec.unkId);
    }
  }

  private encodeByteLevel(text: string, out: number[]): void {
    const prefixed = this.spec.byteLevelPrefixSpace && !text.startsWith(" ") ? ` ${text}` : text;
    const words = this.spec.preTokenizer?.length ? splitWords(prefixed, this.spec.preTokenizer) : [prefixed];
    for (const word of words) {
      const cached = this.wordCache.get(word);
      if (cached) {
        out.push(...cached);
        continue;
      }
      const ids = this.encodeWord(toByteLevel(word));
      if (word.length <= WORD_CACHE_MAX_LENGTH) {
        if (this.wordCache.size >= WORD_CACHE_ENTRIES) this.wordCache.clear();
        this.wordCache.set(word, ids);
      }
      out.push(...ids);
    }
  }

  private encodeWord(word: string): number[] {
    if (this.spec.ignoreMerges) {
      const whole = this.table.id(word);
      if (whole !== undefined) return [whole];
    }
    const ids: number[] = [];
    for (const piece of mergeSymbols(Array.from(word), this.priority)) {
      const id = this.table.id(piece);
      if (id !== undefined) {
        ids.push(id);
        continue;
      }
      // A piece no merge produced and the vocabulary lacks: its characters
      // one by one, dropping any the vocabulary lacks too (as llama.cpp does).
      for (const ch of piece) {
        const charId = this.table.id(ch);
        if (charId !== undefined) ids.push(charId);
        else if (this.spec.unkId !== undefined) ids.push(this.spec.unkId);
      }
    }
    return ids;
  }

  // ---------------------------------------------------------------- decode

  tokenBytes(id: number, options: DecodeOptions = {}): Uint8Array {
    this.checkId(id);
    const kind = this.spec.kinds[id] ?? TokenKind.Normal;
    if (options.skipSpecialTokens && (kind === TokenKind.Control || kind === TokenKind.Unknown)) return new Uint8Array(0);
    let bytes = this.pieceCache.get(id);
    if (!bytes) {
      bytes = this.renderPiece(id, kind);
      this.pieceCache.set(id, bytes);
    }
    return bytes;
  }

  private renderPiece(id: number, kind: TokenKind): Uint8Array {
    const text = this.table.text(id);
    switch (kind) {
      case TokenKind.Byte: {
        const hex = BYTE_TOKEN.exec(text);
        return hex ? Uint8Array.of(parseInt(hex[1]!, 16)) : utf8.encode(text);
      }
      case TokenKind.Control:
      case TokenKind.Unknown:
        // Control tokens are stored as the text they stand for.
        return utf8.encode(text);
      case TokenKind.Unused:
        // Padding slots ("[PAD123]") stand for no text, as in llama.cpp.
        return new Uint8Array(0);
      case TokenKind.UserDefined:
        // Also stored as their text, but a SentencePiece vocabulary may spell
        // spaces in them as "▁" (Gemma's "▁▁" run tokens): those decode as spaces.
        return utf8.encode(this.spec.byteLevel ? text : text.replaceAll(SPACE_MARK, " "));
      default:
        return this.spec.byteLevel ? fromByteLevel(text) : utf8.encode(text.replaceAll(SPACE_MARK, " "));
    }
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    const parts = ids.map((id) => this.tokenBytes(id, options));
    let length = 0;
    for (const part of parts) length += part.length;
    const bytes = new Uint8Array(length);
    let offset = 0;
    for (const part of parts) {
      bytes.set(part, offset);
      offset += part.length;
    }
    const text = utf8Decode(bytes);
    return this.spec.stripLeadingSpace && text.startsWith(" ") ? text.slice(1) : text;
  }

  streamDecoder(options: DecodeOptions = {}): TokenStream {
    return new StreamDecoder(this, { ...options, stripLeadingSpace: this.spec.stripLeadingSpace ?? false });
  }

  renderChat(messages: readonly Message[], options: ChatRenderOptions = {}): string {
    const template = options.chatTemplate ?? this.chatTemplate;
    return renderChat(template, messages, {
      addGenerationPrompt: options.addGenerationPrompt ?? true,
      bosToken: this.spec.bosText ?? (this.bosId !== undefined ? this.table.text(this.bosId) : undefined),
      eosToken: this.spec.eosText ?? (this.eosId !== undefined ? this.table.text(this.eosId) : undefined),
      source: options.chatTemplate !== undefined ? "the chatTemplate option" : (this.spec.chatTemplateSource ?? this.source),
      fromOption: options.chatTemplate !== undefined,
      ...options.extra,
    });
  }
}

/** Bytes in the UTF-8 character that starts with `lead` (1 for a stray continuation byte). */
function utf8CharLength(lead: number | undefined): number {
  if (lead === undefined || lead < 0xc0) return 1;
  return lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
}
