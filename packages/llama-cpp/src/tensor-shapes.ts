// The shapes llama.cpp derives from the hyperparameters, checked against the file's tensors. llama.cpp
// itself refuses a tensor of the wrong shape cleanly, but it asserts (GGML_ASSERT aborts the process)
// on a derived dimension below 1, and its graphs assert on head sizes and RoPE dimensions that
// disagree: each of those is a MODEL_FORMAT here, naming the hyperparameter.
import { type GgufHeader, getNumber } from "@infer/formats";
import type { Hyperparameters } from "./hparams.js";
import { formatError } from "./format-error.js";

/** Architectures whose graph asserts that RoPE turns the whole head (n_embd_head == n_rot), or whose loader refuses otherwise. */
const ROPE_IS_HEAD = new Set(["llama", "llama-embed", "deci", "falcon", "qwen2", "qwen3"]);
/**
 * Architectures whose graph asserts that keys and values have one head size (n_embd_head_v == n_embd_head_k),
 * and gemma3, whose attention output (value heads) meets an output projection shaped from the key heads.
 */
const VALUE_IS_KEY = new Set(["llama", "qwen2", "qwen3", "phi3", "gemma3"]);

/** A dimension llama.cpp expects, and the key it derives from. */
interface Dimension {
  size: number;
  key: string;
}

export function assertTensorShapes(header: GgufHeader, arch: string, hparams: Hyperparameters): void {
  const key = (name: string) => `${arch}.${name}`;
  assertFeedForwardPresent(header, key("feed_forward_length"), hparams);
  const heads = assertHeadSizes(header, arch, hparams);
  const expected = heads && expectedShapes(header, arch, hparams, heads);
  if (!expected) return;
  for (const tensor of header.tensors) {
    const match = /^(?:blk\.\d+\.)?(\w+)\.weight$/.exec(tensor.name);
    const dims = match && expected.get(match[1]!);
    if (!dims) continue;
    for (const dim of dims) {
      if (dim.size < 1) {
        throw formatError(header.source, dim.key, `gives tensor "${tensor.name}" a dimension of ${dim.size}; llama.cpp needs every dimension 1 or more`);
      }
    }
    const at = dims.findIndex((dim, d) => dim.size !== (tensor.shape[d] ?? 1));
    if (at >= 0) {
      const want = dims.map((dim) => dim.size).join(", ");
      throw formatError(header.source, dims[at]!.key, `does not fit tensor "${tensor.name}" [${tensor.shape.join(", ")}]: llama.cpp expects [${want}]`);
    }
  }
}

/** A layer whose feed-forward weights llama.cpp shapes from a size of 0 aborts the load. */
function assertFeedForwardPresent(header: GgufHeader, name: string, { feedForward }: Hyperparameters): void {
  for (const [layer, size] of feedForward.entries()) {
    if (size > 0) continue;
    const tensor = ["ffn_up", "ffn_down", "ffn_gate"].map((t) => `blk.${layer}.${t}.weight`).find((t) => header.tensorByName(t));
    if (tensor) throw formatError(header.source, name, `is 0 for layer ${layer}, which has the feed-forward tensor "${tensor}"`);
  }
}

interface HeadSizes {
  key: number;
  value: number;
  /** The key the key head size comes from. */
  keyField: string;
}

/**
 * The head sizes as llama.cpp derives them (key_length and value_length, else
 * embedding_length / head_count of layer 0), and the RoPE dimension count
 * against them: ggml's rope asserts it even and within the head, and a count
 * of 0 never finishes. Undefined for a model without attention heads.
 */
function assertHeadSizes(header: GgufHeader, arch: string, { embedding, heads }: Hyperparameters): HeadSizes | undefined {
  const { metadata, source: file } = header;
  const key = (name: string) => `${arch}.${name}`;
  const firstHeads = heads[0] ?? 0;
  if (firstHeads === 0 || embedding === undefined) return undefined;
  const split = Math.floor(embedding / firstHeads);
  const keyLength = getNumber(metadata, key("attention.key_length"));
  const valueLength = getNumber(metadata, key("attention.value_length"));
  if (split < 1 && (keyLength === undefined || valueLength === undefined)) {
    throw formatError(file, key("attention.head_count"), `is ${firstHeads}, more than ${key("embedding_length")} ${embedding}: a head would have size 0`);
  }
  const keyField = keyLength !== undefined ? key("attention.key_length") : key("attention.head_count");
  const sizes = { key: keyLength ?? split, value: valueLength ?? split, keyField };
  if (VALUE_IS_KEY.has(arch) && sizes.value !== sizes.key) {
    const field = keyLength !== undefined ? key("attention.key_length") : key("attention.value_length");
    throw formatError(file, field, `gives a key head size of ${sizes.key} and a value head size of ${sizes.value}; llama.cpp's ${arch} needs them equal`);
  }
  const rotKey = key("rope.dimension_count");
  const rot = getNumber(metadata, rotKey);
  if (rot === undefined) return sizes;
  if (!(rot >= 1 && rot % 2 === 0 && rot <= sizes.key)) {
    throw formatError(file, rotKey, `is ${rot}; llama.cpp's RoPE needs an even count from 2 to the head size ${sizes.key}`);
  }
  if (ROPE_IS_HEAD.has(arch) && rot !== sizes.key) {
    throw formatError(file, rotKey, `is ${rot}; llama.cpp's ${arch} turns the whole head of ${sizes.key}`);
  }
  return sizes;
}

/**
 * The standard tensors' shapes (ggml order) for the architectures whose
 * loaders this mirrors (llama.cpp's load_arch_tensors), from layer 0's counts
 * as llama.cpp takes them; undefined for any other architecture.
 */
function expectedShapes(header: GgufHeader, arch: string, hp: Hyperparameters, head: HeadSizes): Map<string, Dimension[]> | undefined {
  const key = (name: string) => `${arch}.${name}`;
  const file = header.source;
  if (!["llama", "qwen2", "qwen3", "gemma3", "phi3"].includes(arch)) return undefined;
  // Sliding-window layers may have head sizes of their own, and layer 0, whose sizes the loaders take, may be one.
  const swaKeys = ["attention.key_length_swa", "attention.value_length_swa", "rope.dimension_count_swa"];
  if (swaKeys.some((name) => header.metadata.has(key(name)))) return undefined;
  const embd = { size: hp.embedding!, key: key("embedding_length") };
  const headCount = hp.heads[0]!;
  const kvKey = key("attention.head_count_kv");
  const kv = hp.kvHeads[0]!;
  // qwen2 and phi3 shape the query as the embedding, and the key like the value.
  const wholeQuery = arch === "qwen2" || arch === "phi3";
  const q = { size: wholeQuery ? embd.size : head.key * headCount, key: wholeQuery ? embd.key : key("attention.head_count") };
  // Their graphs still cut the query into head_count heads of the key head size.
  if (wholeQuery && head.key * headCount !== embd.size) {
    throw formatError(file, key("attention.head_count"), `${headCount} heads of ${head.key} do not make ${embd.key} ${embd.size}`);
  }
  const v = { size: head.value * kv, key: kvKey };
  const k = { size: (wholeQuery || arch === "qwen3" ? head.value : head.key) * kv, key: kvKey };
  const ff = { size: hp.feedForward[0]!, key: key("feed_forward_length") };
  const shapes = new Map<string, Dimension[]>([
    ["output_norm", [embd]],
    ["attn_norm", [embd]],
    ["attn_q", [embd, q]],
    ["attn_k", [embd, k]],
    ["attn_v", [embd, v]],
    ["attn_qkv", [embd, { size: q.size + k.size + v.size, key: q.key }]],
    ["attn_output", [q, embd]],
    ["ffn_norm", [embd]],
    ["ffn_gate", [embd, ff]],
    ["ffn_up", [embd, arch === "phi3" ? { ...ff, size: 2 * ff.size } : ff]],
    ["ffn_down", [ff, embd]],
  ]);
  if (arch === "qwen3" || arch === "gemma3") {
    const headKey = { size: head.key, key: head.keyField };
    shapes.set("attn_q_norm", [headKey]).set("attn_k_norm", [headKey]);
  }
  if (arch === "gemma3") shapes.set("attn_post_norm", [embd]).set("ffn_post_norm", [embd]);
  return shapes;
}
