// The architecture hyperparameters llama.cpp reads in llama_model::load_hparams and asserts on
// (GGML_ASSERT aborts the process): checked here first, each failure naming its key.
import { type GgufHeader, type GgufMetadata, GgufValueType, getNumber, getNumberArray, getString } from "@infer/formats";
import { formatError } from "./format-error.js";

/** llama.cpp's LLAMA_MAX_LAYERS: per-layer hyperparameters live in arrays of this size. */
export const LLAMA_MAX_LAYERS = 512;
/** llama.cpp's LLAMA_MAX_EXPERTS. */
export const LLAMA_MAX_EXPERTS = 1024;
/** The values of `<arch>.rope.scaling.type` llama.cpp knows; any other aborts the load. */
const ROPE_SCALING_TYPES = ["none", "linear", "yarn", "longrope"];

/** The counts later checks derive tensor shapes from: per-layer arrays hold one value for every layer. */
export interface Hyperparameters {
  layers: number;
  embedding: number | undefined;
  feedForward: number[];
  heads: number[];
  kvHeads: number[];
}

export function assertHyperparameters(header: GgufHeader, arch: string): Hyperparameters {
  const { metadata, source: file } = header;
  const key = (name: string) => `${arch}.${name}`;
  assertFiniteFloats(metadata, file, `${arch}.`);

  const layers = integer(metadata, file, key("block_count"), { required: true, min: 1, max: LLAMA_MAX_LAYERS })!;
  integer(metadata, file, key("nextn_predict_layers"), { max: layers });
  integer(metadata, file, key("context_length"), { min: 1 });
  const embedding = integer(metadata, file, key("embedding_length"), { min: 1 });
  const feedForward = perLayer(metadata, file, key("feed_forward_length"), layers);
  assertExperts(metadata, file, key, layers);

  const heads = perLayer(metadata, file, key("attention.head_count"), layers);
  const kvKey = key("attention.head_count_kv");
  const kvHeads = metadata.has(kvKey) ? perLayer(metadata, file, kvKey, layers) : heads;
  for (let layer = 0; layer < layers; layer++) {
    const has = (tensor: string) => header.tensorByName(`blk.${layer}.${tensor}.weight`) !== undefined;
    const [q, kv] = [heads[layer] ?? 0, kvHeads[layer] ?? 0];
    if (q === 0 && (has("attn_q") || has("attn_qkv"))) {
      throw formatError(file, key("attention.head_count"), `is 0 for layer ${layer}, which has attention weights`);
    }
    if (kv === 0 && has("attn_k")) throw formatError(file, kvKey, `is 0 for layer ${layer}, which has attention key weights`);
    if (q > 0 && kv > 0 && q % kv !== 0) {
      throw formatError(file, kvKey, `${kv} does not divide ${key("attention.head_count")} ${q} (layer ${layer})`);
    }
  }
  const keyLength = integer(metadata, file, key("attention.key_length"), { min: 1 });
  integer(metadata, file, key("attention.value_length"), { min: 1 });
  const firstHeads = heads[0] ?? 0;
  if (keyLength === undefined && embedding !== undefined && firstHeads > 0 && embedding % firstHeads !== 0) {
    throw formatError(file, key("embedding_length"), `${embedding} is not a multiple of ${key("attention.head_count")} ${firstHeads}`);
  }

  for (const name of metadata.keys()) {
    if (name.startsWith(`${arch}.`) && name.endsWith("epsilon")) positive(metadata, file, name);
  }
  positive(metadata, file, key("rope.freq_base"));
  for (const name of ["rope.scaling.factor", "rope.scale_linear", "rope.scaling.attn_factor"]) {
    const value = getNumber(metadata, key(name));
    if (value !== undefined && value < 0) throw formatError(file, key(name), `is ${value}, negative`);
  }
  const scaling = getString(metadata, key("rope.scaling.type"));
  if (scaling !== undefined && !ROPE_SCALING_TYPES.includes(scaling)) {
    throw formatError(file, key("rope.scaling.type"), `is "${scaling}", not one of ${ROPE_SCALING_TYPES.join(", ")}`);
  }
  return { layers, embedding, feedForward, heads, kvHeads };
}

/** Expert routing, as llama.cpp asserts it: used <= count <= LLAMA_MAX_EXPERTS, groups dividing the experts. */
function assertExperts(metadata: GgufMetadata, file: string, key: (name: string) => string, layers: number): void {
  const experts = integer(metadata, file, key("expert_count"), { max: LLAMA_MAX_EXPERTS }) ?? 0;
  const usedKey = key("expert_used_count");
  const usedMax = Math.max(0, ...perLayer(metadata, file, usedKey, layers));
  if (usedMax > experts) throw formatError(file, usedKey, `${usedMax} exceeds ${key("expert_count")} ${experts}`);
  if (experts > 0 && usedMax === 0) throw formatError(file, usedKey, `is 0 although the model has ${experts} experts`);
  const groupsKey = key("expert_group_count");
  const groups = integer(metadata, file, groupsKey, {}) ?? 0;
  if (experts === 0 && groups !== 0) throw formatError(file, groupsKey, `is ${groups} although the model has no experts`);
  if (experts > 0 && groups >= experts) throw formatError(file, groupsKey, `${groups} is not below ${key("expert_count")} ${experts}`);
  if (groups > 1) {
    if (experts % groups !== 0) throw formatError(file, groupsKey, `${groups} does not divide ${key("expert_count")} ${experts}`);
    const usedGroupsKey = key("expert_group_used_count");
    const usedGroups = integer(metadata, file, usedGroupsKey, {}) ?? 0;
    if (usedGroups < 1 || usedGroups >= groups) throw formatError(file, usedGroupsKey, `${usedGroups} is not between 1 and ${groups - 1}`);
  }
}

/** An integer key's value, checked against bounds; undefined when absent and not required. */
function integer(
  metadata: GgufMetadata,
  file: string,
  name: string,
  bounds: { required?: boolean; min?: number; max?: number },
): number | undefined {
  const value = getNumber(metadata, name, bounds.required ?? false);
  if (value === undefined) return undefined;
  const { min = 0, max = 2 ** 32 - 1 } = bounds;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw formatError(file, name, `is ${value}; llama.cpp needs an integer from ${min} to ${max}`);
  }
  return value;
}

/** A key llama.cpp reads as one value for every layer or as an array of one per layer (0 when absent). */
function perLayer(metadata: GgufMetadata, file: string, name: string, layers: number): number[] {
  if (metadata.get(name)?.type !== GgufValueType.ARRAY) {
    const value = integer(metadata, file, name, {}) ?? 0;
    return new Array<number>(layers).fill(value);
  }
  const items = Array.from(getNumberArray(metadata, name, true));
  if (items.length !== layers) throw formatError(file, name, `holds ${items.length} values for ${layers} layers`);
  const bad = items.findIndex((item) => !Number.isInteger(item) || item < 0 || item > 2 ** 32 - 1);
  if (bad >= 0) throw formatError(file, name, `is ${items[bad]} for layer ${bad}; llama.cpp needs a non-negative integer`);
  return items;
}

/** An optional float that must be finite and above zero (an epsilon, a frequency base). */
function positive(metadata: GgufMetadata, file: string, name: string): void {
  const value = getNumber(metadata, name);
  if (value !== undefined && !(value > 0)) throw formatError(file, name, `is ${value}; llama.cpp needs a finite value above 0`);
}

/** NaN or an infinity in a float hyperparameter is never meaningful; llama.cpp would compute with it. */
function assertFiniteFloats(metadata: GgufMetadata, file: string, prefix: string): void {
  const isFloat = (type: GgufValueType) => type === GgufValueType.FLOAT32 || type === GgufValueType.FLOAT64;
  for (const [name, entry] of metadata) {
    if (!name.startsWith(prefix)) continue;
    if (isFloat(entry.type) && !Number.isFinite(entry.value)) throw formatError(file, name, `is ${String(entry.value)}, not a finite number`);
    if (entry.type === GgufValueType.ARRAY && isFloat(entry.itemType)) {
      const items = entry.value as ArrayLike<number>;
      for (let i = 0; i < items.length; i++) {
        if (!Number.isFinite(items[i])) throw formatError(file, name, `[${i}] is ${items[i]}, not a finite number`);
      }
    }
  }
}
