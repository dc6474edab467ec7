// The fuzz targets: what each mutates, from which seeds, and how a case is laid out on disk for the child.
import { mutateGguf } from "./mutate-gguf.mjs";
import { mutateJsonText } from "./mutate-json.mjs";
import { mutateSafetensors } from "./mutate-safetensors.mjs";
import { mutateGrammar, SEED_GRAMMAR } from "./mutate-grammar.mjs";
import { mutateTemplate, SEED_TEMPLATE } from "./mutate-template.mjs";
import { mutateRequest } from "./mutate-http.mjs";
import { PEFT_FILES } from "./seeds.mjs";

const CONFIG_FIELDS =
  /^(architectures|model_type|vocab_size|hidden_size|intermediate_size|num_hidden_layers|num_attention_heads|num_key_value_heads|head_dim|max_position_embeddings|rms_norm_eps|rope_theta|rope_scaling|tie_word_embeddings|bos_token_id|eos_token_id|torch_dtype|sliding_window|sliding_window_pattern|query_pre_attn_scalar|final_logit_softcapping|factor|short_factor|long_factor)$/;
const TOKENIZER_FIELDS = /^(model|type|vocab|merges|added_tokens|pre_tokenizer|normalizer|decoder|post_processor|id|content|special|byte_fallback|ignore_merges|pretokenizers)$/;
const PEFT_CONFIG_FIELDS =
  /^(peft_type|task_type|r|lora_alpha|lora_dropout|target_modules|use_rslora|use_dora|fan_in_fan_out|bias|lora_bias|base_model_name_or_path|rank_pattern|alpha_pattern|modules_to_save|layers_to_transform|layers_pattern|target_parameters|trainable_token_indices)$/;
const TOKENIZER_CONFIG_FIELDS = /^(bos_token|eos_token|unk_token|pad_token|add_bos_token|add_eos_token|chat_template|tokenizer_class|added_tokens_decoder|model_max_length)$/;

/** Seeds bigger than this are used by one case in eight, so the real models do not slow a campaign down. */
const BIG = 256 * 1024;

function pickSeed(r, seeds) {
  const small = seeds.filter((s) => (s.bytes?.length ?? s.files["model.safetensors"].length) < BIG);
  return r.chance(0.125) ? r.pick(seeds) : r.pick(small);
}

const ggufTarget = (name, part) => ({
  name,
  kind: "model",
  entry: "model.gguf",
  backends: ["wasm", "llama_cpp"],
  make(r, seeds) {
    const seed = pickSeed(r, seeds.gguf);
    const { bytes, tags } = mutateGguf(r, seed.bytes, part);
    return { seed: seed.name, files: { "model.gguf": bytes }, tags };
  },
});

/** A Hugging Face folder with one file mutated; the others are the seed's (linked, not copied). */
const hfTarget = (name, file, mutate) => ({
  name,
  kind: "model",
  entry: ".",
  backends: ["wasm"],
  make(r, seeds) {
    const seed = pickSeed(r, seeds.hf);
    const { bytes, tags } = mutate(r, seed.files[file]);
    return { seed: seed.name, files: { [file]: bytes }, links: seed.folder, tags };
  },
});

/**
 * A LoRA adapter given as `adapterPath` when its base model loads: `base` is the seed's model, `entry` the
 * adapter inside the case's folder.
 */
const peftTarget = {
  name: "peft-adapter",
  kind: "adapter",
  entry: ".",
  // llama_cpp reads GGUF adapters only and refuses a PEFT folder before reading it.
  backends: ["wasm"],
  make(r, seeds) {
    const seed = r.pick(seeds.peft);
    const [file, mutate] = r.chance(0.5) ? ["adapter_config.json", jsonFile(PEFT_CONFIG_FIELDS)] : ["adapter_model.safetensors", mutateSafetensors];
    const { bytes, tags } = mutate(r, seed.files[file]);
    return { seed: seed.name, files: { [file]: bytes }, links: seed.folder, linkNames: PEFT_FILES, base: seed.base, tags: [file, ...tags] };
  },
};

const ggufAdapterTarget = {
  name: "gguf-adapter",
  kind: "adapter",
  entry: "adapter.gguf",
  backends: ["wasm", "llama_cpp"],
  make(r, seeds) {
    const seed = r.pick(seeds.ggufLora);
    const { bytes, tags } = mutateGguf(r, seed.bytes, r.pick(["header", "tensors"]));
    return { seed: seed.name, files: { "adapter.gguf": bytes }, base: seed.base, tags };
  },
};

const jsonFile = (prefer) => (r, bytes) => {
  const mutant = mutateJsonText(r, bytes.toString("utf8"), prefer);
  return { bytes: mutant.raw ?? Buffer.from(mutant.text, "utf8"), tags: mutant.tags };
};

export const TARGETS = [
  ggufTarget("gguf-header", "header"),
  ggufTarget("gguf-tensors", "tensors"),
  hfTarget("safetensors", "model.safetensors", mutateSafetensors),
  hfTarget("config-json", "config.json", jsonFile(CONFIG_FIELDS)),
  hfTarget("tokenizer-json", "tokenizer.json", jsonFile(TOKENIZER_FIELDS)),
  hfTarget("tokenizer-config", "tokenizer_config.json", jsonFile(TOKENIZER_CONFIG_FIELDS)),
  peftTarget,
  ggufAdapterTarget,
  {
    name: "chat-template",
    kind: "template",
    backends: ["wasm", "llama_cpp"],
    make(r) {
      const { text, tags } = mutateTemplate(r, SEED_TEMPLATE);
      return { seed: "template", files: { "template.jinja": Buffer.from(text, "utf8") }, tags };
    },
  },
  {
    name: "grammar",
    kind: "grammar",
    // Only llama_cpp constrains output with a grammar; wasm refuses the option whole (UNSUPPORTED).
    backends: ["llama_cpp"],
    make(r) {
      const { text, tags } = mutateGrammar(r, SEED_GRAMMAR);
      return { seed: "grammar", files: { "grammar.gbnf": Buffer.from(text, "utf8") }, tags };
    },
  },
  {
    name: "http",
    kind: "request",
    backends: ["wasm", "llama_cpp"],
    make(r, _seeds, index) {
      const { path, body, tags } = mutateRequest(r, index);
      return { seed: "request", files: { "request.json": Buffer.from(JSON.stringify({ path })), body }, tags };
    },
  },
];

export const targetNamed = (name) => TARGETS.find((t) => t.name === name);
