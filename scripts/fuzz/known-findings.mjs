// Findings already reported whose fixes have not landed. A campaign counts a matching case as `known`,
// not new; `--skip-known` does not even run it (a llama.cpp abort costs a child restart of seconds). Each predicate reads the mutant itself, so it also
// catches the same fault reached by another mutation. Remove an entry when its fix lands, so the fuzzer
// checks the fix.
import { scanGguf } from "./mutate-gguf.mjs";

const FLOAT32 = 6;
const FLOAT64 = 12;
/** llama.cpp's LLAMA_MAX_LAYERS. */
const MAX_LAYERS = 512;

/** The mutant's GGUF layout and its numeric metadata by key (last segment of the key), if it is a GGUF case. */
function gguf(fuzzCase) {
  const bytes = fuzzCase.files["model.gguf"];
  if (!bytes) return undefined;
  const layout = scanGguf(bytes);
  const architecture = architectureOf(bytes, layout);
  const values = {};
  for (const kv of layout.kvs) {
    // Only the architecture's own keys: a renamed key is a missing one to llama.cpp.
    if (kv.width === 0 || kv.offset + kv.width > bytes.length || !kv.key.startsWith(`${architecture}.`)) continue;
    const name = kv.key.slice(architecture.length + 1);
    if (kv.type === FLOAT32) values[name] = bytes.readFloatLE(kv.offset);
    else if (kv.type === FLOAT64) values[name] = bytes.readDoubleLE(kv.offset);
    else if (kv.width === 4) values[name] = kv.type === 5 ? bytes.readInt32LE(kv.offset) : bytes.readUInt32LE(kv.offset);
    else if (kv.width === 8) values[name] = Number(bytes.readBigUInt64LE(kv.offset));
  }
  return { layout, values, architecture };
}

function architectureOf(bytes, layout) {
  const field = layout.fields.find((f) => f.kind === "string_length" && f.key === "general.architecture");
  return field ? bytes.subarray(field.offset + 8, field.offset + 8 + Number(field.value)).toString("utf8") : undefined;
}

export const KNOWN_FINDINGS = [
  {
    id: "llama-gguf-malformed",
    backends: ["llama_cpp"],
    outcomes: ["crash", "hang", "memory"],
    issue: "#21 (still open after the GGUF validation: hyperparameters against tensor shapes, RoPE dimensions, empty keys)",
    about:
      "a GGUF whose header or tensor table does not parse (a changed tensor-name length, value type or dimension " +
      "count; a table running past the file) takes minutes and gigabytes, or aborts; so does an empty key " +
      "(GGML_ASSERT(!key.empty()))",
    matches(c) {
      const layout = gguf(c)?.layout;
      if (!layout) return false;
      const pastMagic = layout.fields.some((f) => f.kind === "kv_count");
      return (
        (pastMagic && !layout.complete) ||
        layout.fields.some((f) => (f.kind === "tensor_n_dims" && f.value > 4n) || (f.kind === "key_length" && f.value === 0n))
      );
    },
  },
  {
    id: "llama-gguf-model-values",
    backends: ["llama_cpp"],
    outcomes: ["crash", "hang", "memory"],
    issue: "#21 (still open after the GGUF validation: hyperparameters against tensor shapes, RoPE dimensions, empty keys)",
    about:
      "out-of-range or inconsistent model metadata aborts llama.cpp (GGML_ASSERT): block_count over 512 (65535 " +
      "seen), an RMS epsilon NaN or negative (at the first generation), a size or head count missing, 0 or 2^31 " +
      "and up (a renamed key is a missing one), more heads than " +
      "embedding values or KV heads than heads, a RoPE dimension count other than the head size, phi3 key_length " +
      "other than embedding_length / head_count; a context_length of 2^31-1 makes the automatic context take gigabytes",
    matches(c) {
      const g = gguf(c);
      if (!g) return false;
      const v = g.values;
      const epsilon = v["attention.layer_norm_rms_epsilon"];
      if (v.block_count > MAX_LAYERS) return true;
      if (epsilon !== undefined && !(epsilon >= 0 && Number.isFinite(epsilon))) return true;
      // Sizes llama.cpp needs (a missing one reads as 0) and keeps in 32-bit signed arithmetic.
      const required = ["embedding_length", "feed_forward_length", "attention.head_count", "block_count"];
      const optional = ["attention.head_count_kv", "attention.key_length", "attention.value_length"];
      const usable = (value) => value >= 1 && value < 2 ** 31;
      if (g.layout.complete && required.some((key) => !usable(v[key]))) return true;
      if (optional.some((key) => v[key] !== undefined && !usable(v[key]))) return true;
      const heads = v["attention.head_count"];
      const kvHeads = v["attention.head_count_kv"];
      if (heads > v.embedding_length || kvHeads > heads || heads % kvHeads !== 0) return true;
      // With contextSize "auto", llama.cpp sizes the KV cache from the trained context: gigabytes.
      if (v.context_length > 1 << 20) return true;
      const headDim = v["attention.key_length"] ?? v.embedding_length / v["attention.head_count"];
      if (v["rope.dimension_count"] !== undefined && v["rope.dimension_count"] !== headDim) return true;
      const split = v.embedding_length / v["attention.head_count"];
      return g.architecture === "phi3" && (v["attention.key_length"] !== split || v["attention.value_length"] !== split);
    },
  },
];

/** The known finding a case matches on a backend, if any. */
export function knownFinding(fuzzCase, backend) {
  return KNOWN_FINDINGS.find((k) => k.backends.includes(backend) && k.matches(fuzzCase));
}
