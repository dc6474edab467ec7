/**
 * Builds a tokenizer from a Hugging Face model folder's JSON files:
 * tokenizer.json (the model, normalizer, pre-tokenizer, decoder, added
 * tokens), tokenizer_config.json (chat template, bos/eos, add_bos_token),
 * generation_config.json and config.json (eos ids, possibly a list).
 *
 * The tokenizer.json pipeline is mapped onto our own engine rather than run
 * through @huggingface/tokenizers: the two vocabulary sources then share one
 * implementation, and the tests can check it against @huggingface/tokenizers
 * as an independent reference. Supported: model "BPE", either byte-level
 * (ByteLevel pre-tokenizer, Split regexes) or SentencePiece-style (Replace
 * " " -> "▁" / Prepend "▁" normalizers or Metaspace, byte_fallback).
 */
import { InferenceError } from "@infer/core";
import { GPT2_PATTERN, compileSplitPattern } from "./pretokenize.js";
import { TokenKind } from "./types.js";
import { VocabTokenizer, type VocabularySpec } from "./vocab-tokenizer.js";

type Json = Record<string, unknown>;

export interface HfTokenizerFiles {
  /** Parsed tokenizer.json. */
  tokenizer: unknown;
  /** Parsed tokenizer_config.json. */
  tokenizerConfig?: unknown;
  /** Parsed generation_config.json. */
  generationConfig?: unknown;
  /** Parsed config.json. */
  modelConfig?: unknown;
  /** A chat template from chat_template.jinja, preferred over tokenizer_config's. */
  chatTemplate?: string;
  /** Where `chatTemplate` came from, for messages. */
  chatTemplateSource?: string;
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);

/** A component and, for "Sequence" components, everything inside it, flattened. */
function components(node: unknown, listKey: string): Json[] {
  if (!isObject(node)) return [];
  if (node.type === "Sequence" && Array.isArray(node[listKey])) {
    return (node[listKey] as unknown[]).flatMap((child) => components(child, listKey));
  }
  return [node];
}

/** A token named in tokenizer_config ("<s>" or { content: "<s>" }). */
function tokenContent(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (isObject(value) && typeof value.content === "string") return value.content;
  return undefined;
}

function idList(value: unknown): number[] {
  const values = Array.isArray(value) ? value : [value];
  return values.filter((v): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0);
}

function chatTemplateOf(config: Json): string | undefined {
  const template = config.chat_template;
  if (typeof template === "string") return template;
  // Some configs list named templates; "default" is the chat one.
  if (Array.isArray(template)) {
    const named = template.filter(isObject);
    const chosen = named.find((t) => t.name === "default") ?? named[0];
    return typeof chosen?.template === "string" ? chosen.template : undefined;
  }
  return undefined;
}

export function tokenizerFromHfJson(files: HfTokenizerFiles, source: string): VocabTokenizer {
  const fail = (field: string, problem: string): never => {
    throw new InferenceError("MODEL_FORMAT", `${source}: ${field} ${problem}`, { details: { source, field } });
  };
  const json = files.tokenizer;
  if (!isObject(json)) fail("tokenizer.json", "is not a JSON object");
  const tok = json as Json;
  const model = tok.model;
  if (!isObject(model)) return fail("tokenizer.json model", "is missing");
  if (model.type !== undefined && model.type !== "BPE") fail("tokenizer.json model.type", `"${String(model.type)}" is not supported (BPE is)`);
  if (!isObject(model.vocab)) fail("tokenizer.json model.vocab", "is missing or not an object");
  if (!Array.isArray(model.merges)) fail("tokenizer.json model.merges", "is missing or not an array");

  // ---- vocabulary: model vocab plus added tokens, holes filled like llama.cpp's converter does
  const vocab = model.vocab as Json;
  const added = Array.isArray(tok.added_tokens) ? tok.added_tokens.filter(isObject) : [];
  let size = 0;
  let listed = 0;
  for (const text in vocab) {
    const id = vocab[text];
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) fail(`tokenizer.json model.vocab["${text}"]`, "is not a token id");
    size = Math.max(size, (id as number) + 1);
    listed++;
  }
  for (const entry of added) {
    if (typeof entry.id !== "number" || !Number.isSafeInteger(entry.id) || entry.id < 0 || typeof entry.content !== "string") {
      fail("tokenizer.json added_tokens", "has an entry without a valid id and content");
    }
    size = Math.max(size, (entry.id as number) + 1);
  }
  if (size > (listed + added.length) * 2 + 1024) fail("tokenizer.json", `ids reach ${size - 1} but only ${listed + added.length} tokens are listed`);
  const tokens = new Array<string | undefined>(size);
  for (const text in vocab) tokens[vocab[text] as number] = text;
  for (const entry of added) tokens[entry.id as number] = entry.content as string;
  const kinds = new Uint8Array(size).fill(TokenKind.Normal);
  for (let id = 0; id < size; id++) {
    if (tokens[id] === undefined) {
      tokens[id] = `[PAD${id}]`;
      kinds[id] = TokenKind.Unused;
    }
  }

  const byteFallback = model.byte_fallback === true;
  if (byteFallback) {
    for (let byte = 0; byte < 256; byte++) {
      const id = vocab[`<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`];
      if (typeof id === "number") kinds[id] = TokenKind.Byte;
    }
  }
  const addedIds = new Map(added.map((entry) => [entry.content as string, entry.id as number]));
  /** A token's id by text (added tokens first, as Hugging Face resolves them). */
  const idOf = (text: string): number | undefined => {
    const id = addedIds.get(text) ?? vocab[text];
    return typeof id === "number" ? id : undefined;
  };
  const unkId = typeof model.unk_token === "string" ? idOf(model.unk_token) : undefined;
  if (unkId !== undefined) kinds[unkId] = TokenKind.Unknown;
  const addedTokenFlags = new Map<number, { lstrip: boolean; rstrip: boolean }>();
  for (const entry of added) {
    const id = entry.id as number;
    if (id !== unkId) kinds[id] = entry.special === true ? TokenKind.Control : TokenKind.UserDefined;
    addedTokenFlags.set(id, { lstrip: entry.lstrip === true, rstrip: entry.rstrip === true });
  }

  const merges = model.merges as unknown[];
  merges.forEach((merge, i) => {
    const pair = Array.isArray(merge) && merge.length === 2 && typeof merge[0] === "string" && typeof merge[1] === "string";
    if (!pair && typeof merge !== "string") fail(`tokenizer.json model.merges[${i}]`, "is not a pair");
  });

  // ---- pipeline components
  const normalizers = components(tok.normalizer, "normalizers");
  const preTokenizers = components(tok.pre_tokenizer, "pretokenizers");
  const decoders = components(tok.decoder, "decoders");
  const byteLevel = preTokenizers.some((p) => p.type === "ByteLevel") || decoders.some((d) => d.type === "ByteLevel");
  const nfc = normalizers.some((n) => n.type === "NFC");
  for (const n of normalizers) {
    if (!["NFC", "Prepend", "Replace"].includes(String(n.type))) fail("tokenizer.json normalizer", `type "${String(n.type)}" is not supported`);
  }

  const config = isObject(files.tokenizerConfig) ? files.tokenizerConfig : {};
  const generation = isObject(files.generationConfig) ? files.generationConfig : {};
  const modelConfig = isObject(files.modelConfig) ? files.modelConfig : {};

  // ---- special ids: the post-processor says what encode adds; configs name bos/eos
  const post = components(tok.post_processor, "processors").find((p) => p.type === "TemplateProcessing");
  const single = Array.isArray(post?.single) ? post.single.filter(isObject) : [];
  const specialAt = (entry: Json | undefined) => (isObject(entry?.SpecialToken) ? idOf(String(entry.SpecialToken.id)) : undefined);
  const postBos = specialAt(single[0]);
  const postEos = single.length > 1 ? specialAt(single[single.length - 1]) : undefined;
  const configBos = tokenContent(config.bos_token);
  const configEos = tokenContent(config.eos_token);
  const bosId = idList(modelConfig.bos_token_id)[0] ?? (configBos !== undefined ? idOf(configBos) : undefined) ?? postBos;
  const configEosId = configEos !== undefined ? idOf(configEos) : undefined;
  const eosIds = [
    ...idList(generation.eos_token_id),
    ...idList(modelConfig.eos_token_id),
    ...(configEosId !== undefined ? [configEosId] : []),
  ].filter((id) => id < size);
  const eosId = configEosId ?? postEos ?? eosIds[0];
  const addBos = typeof config.add_bos_token === "boolean" ? config.add_bos_token : postBos !== undefined;
  const addEos = typeof config.add_eos_token === "boolean" ? config.add_eos_token : postEos !== undefined;

  const common = {
    source,
    tokens: tokens as string[],
    kinds: kinds as unknown as ArrayLike<TokenKind>,
    merge: { by: "rank" as const, merges: merges as (string | [string, string])[], field: "tokenizer.json model.merges" },
    unkId,
    bosId: bosId !== undefined && bosId < size ? bosId : undefined,
    eosId,
    eosIds,
    addBos,
    addEos,
    chatTemplate: files.chatTemplate ?? chatTemplateOf(config),
    chatTemplateSource: files.chatTemplate !== undefined ? files.chatTemplateSource : `${source.replace(/tokenizer\.json$/, "")}tokenizer_config.json chat_template`,
    bosText: configBos,
    eosText: configEos,
    addedTokenFlags,
    nfc,
  };

  let spec: VocabularySpec;
  if (byteLevel) {
    const patterns: RegExp[] = [];
    let prefixSpace = false;
    for (const p of preTokenizers) {
      if (p.type === "Split") {
        if (p.behavior !== undefined && p.behavior !== "Isolated") fail("tokenizer.json pre_tokenizer", `Split behavior "${String(p.behavior)}" is not supported`);
        if (p.invert === true) fail("tokenizer.json pre_tokenizer", "an inverted Split is not supported");
        const pattern = isObject(p.pattern) ? p.pattern : {};
        if (typeof pattern.Regex === "string") patterns.push(compileSplitPattern(pattern.Regex, source));
        else if (typeof pattern.String === "string") patterns.push(new RegExp(pattern.String.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "gu"));
      } else if (p.type === "ByteLevel") {
        if (p.use_regex !== false) patterns.push(compileSplitPattern(GPT2_PATTERN, source));
        prefixSpace = p.add_prefix_space === true;
      } else if (p.type === "Digits") {
        patterns.push(new RegExp(p.individual_digits === true ? "\\p{N}" : "\\p{N}+", "gu"));
      } else {
        fail("tokenizer.json pre_tokenizer", `type "${String(p.type)}" is not supported`);
      }
    }
    spec = {
      ...common,
      byteLevel: true,
      preTokenizer: patterns,
      ignoreMerges: model.ignore_merges === true,
      byteLevelPrefixSpace: prefixSpace,
    };
  } else {
    // SentencePiece-style: spaces become "▁", optionally prefixed; a Split on
    // " " after that normalizer has nothing left to split.
    const metaspace = preTokenizers.find((p) => p.type === "Metaspace");
    const prepends = normalizers.some((n) => n.type === "Prepend" && n.prepend === "▁");
    const replaces = normalizers.some((n) => n.type === "Replace" && isObject(n.pattern) && n.pattern.String === " " && n.content === "▁");
    if (!metaspace && !replaces) fail("tokenizer.json", "is neither byte-level nor SentencePiece-style (no ByteLevel, Metaspace or Replace \" \" -> \"▁\")");
    if (metaspace && (metaspace.replacement ?? "▁") !== "▁") fail("tokenizer.json pre_tokenizer", "a Metaspace replacement other than \"▁\" is not supported");
    const scheme = metaspace === undefined ? "never" : (metaspace.prepend_scheme ?? (metaspace.add_prefix_space === false ? "never" : "always"));
    const stripDecoder = decoders.some((d) => d.type === "Strip" && d.content === " " && Number(d.start) >= 1);
    const metaspaceDecoder = decoders.find((d) => d.type === "Metaspace");
    const metaspaceStrips = metaspaceDecoder !== undefined && (metaspaceDecoder.prepend_scheme ?? "always") !== "never" && metaspaceDecoder.add_prefix_space !== false;
    spec = {
      ...common,
      byteLevel: false,
      addSpacePrefix: prepends || scheme === "always" ? true : scheme === "first" ? "first" : false,
      // The Prepend normalizer always adds "▁"; Metaspace only where none leads already.
      spacePrefixUnlessSpace: !prepends && metaspace !== undefined,
      // Metaspace splits into words at each "▁" unless told not to (the Rust default is to split).
      splitAtSpaceMark: metaspace !== undefined && metaspace.split !== false,
      stripLeadingSpace: stripDecoder || metaspaceStrips,
    };
  }
  return new VocabTokenizer(spec);
}
