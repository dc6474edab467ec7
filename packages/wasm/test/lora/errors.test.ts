/** Bad adapters: InferenceError with a stable code naming the file and field, never a crash. */
import assert from "node:assert/strict";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isInferenceError, loadModel } from "@infer/core";
import "../../src/index.js";
import { loadTransformer, type LoadedTransformer } from "../../src/load/load.js";
import { loraDeltas, readLoraAdapter, readPeftFolder, writePeftFolder, type LoraAdapter } from "../../src/lora/index.js";
import { SHARED_MODELS, skipWithoutSharedModels } from "../engine/helpers.js";
import { PEFT_ADAPTER, TINYSTORIES } from "./fixtures.js";

const skip = skipWithoutSharedModels();

function rejectsWith(code: string, ...mentions: string[]) {
  return (error: unknown) => {
    assert.ok(isInferenceError(error, code as never), `expected ${code}, got ${String(error)}`);
    for (const text of mentions) assert.ok((error as Error).message.includes(text), `"${(error as Error).message}" should name ${text}`);
    return true;
  };
}

describe("bad LoRA adapters", () => {
  let dir: string;
  let count = 0;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-lora-errors-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** A copy of PEFT's fixture folder with adapter_config.json edited. */
  async function withConfig(edit: (config: Record<string, unknown>) => void): Promise<string> {
    const folder = join(dir, `config-${count++}`);
    await cp(PEFT_ADAPTER, folder, { recursive: true });
    const config = JSON.parse(await readFile(join(folder, "adapter_config.json"), "utf8")) as Record<string, unknown>;
    edit(config);
    await writeFile(join(folder, "adapter_config.json"), JSON.stringify(config));
    return folder;
  }

  /** Our writer's folder for the fixture adapter changed by `edit`. */
  async function withAdapter(edit: (adapter: LoraAdapter) => LoraAdapter): Promise<string> {
    const folder = join(dir, `adapter-${count++}`);
    await writePeftFolder(folder, edit(await readPeftFolder(PEFT_ADAPTER)));
    return folder;
  }

  test("adapter_config.json: corrupt JSON, wrong types and unsupported settings name the field", async () => {
    const broken = join(dir, "broken-json");
    await cp(PEFT_ADAPTER, broken, { recursive: true });
    await writeFile(join(broken, "adapter_config.json"), '{"peft_type": "LORA", "r": ');
    await assert.rejects(readLoraAdapter(broken), rejectsWith("MODEL_FORMAT", "adapter_config.json"));
    const cases: [(c: Record<string, unknown>) => void, string, string][] = [
      [(c) => (c.peft_type = "IA3"), "UNSUPPORTED", "peft_type"],
      [(c) => (c.r = 0), "MODEL_FORMAT", "r:"],
      [(c) => (c.r = 2.5), "MODEL_FORMAT", "r:"],
      [(c) => (c.lora_alpha = -1), "MODEL_FORMAT", "lora_alpha"],
      [(c) => (c.lora_alpha = "16"), "MODEL_FORMAT", "lora_alpha"],
      [(c) => (c.target_modules = ["q_proj", "lm_head"]), "UNSUPPORTED", "lm_head"],
      [(c) => (c.target_modules = []), "MODEL_FORMAT", "target_modules"],
      [(c) => (c.use_dora = true), "UNSUPPORTED", "use_dora"],
      [(c) => (c.rank_pattern = { q_proj: 8 }), "UNSUPPORTED", "rank_pattern"],
      [(c) => (c.modules_to_save = ["lm_head"]), "UNSUPPORTED", "modules_to_save"],
      [(c) => (c.task_type = "SEQ_CLS"), "UNSUPPORTED", "task_type"],
      [(c) => (c.r = 8), "MODEL_FORMAT", "rank 4"],
      [(c) => (c.target_modules = ["q_proj"]), "MODEL_FORMAT", "v_proj"],
    ];
    for (const [edit, code, field] of cases) {
      const folder = await withConfig(edit);
      await assert.rejects(readLoraAdapter(folder), rejectsWith(code, field));
    }
  });

  test("adapter_model.safetensors: missing, truncated, an unknown tensor or half a pair name the file", async () => {
    const missing = join(dir, "no-weights");
    await cp(PEFT_ADAPTER, missing, { recursive: true });
    await rm(join(missing, "adapter_model.safetensors"));
    await assert.rejects(readLoraAdapter(missing), rejectsWith("MODEL_NOT_FOUND", "adapter_model.safetensors"));

    const truncated = join(dir, "truncated");
    await cp(PEFT_ADAPTER, truncated, { recursive: true });
    const bytes = await readFile(join(truncated, "adapter_model.safetensors"));
    await writeFile(join(truncated, "adapter_model.safetensors"), bytes.subarray(0, bytes.length - 100));
    await assert.rejects(readLoraAdapter(truncated), rejectsWith("MODEL_FORMAT", "adapter_model.safetensors"));

    // One B left out of an otherwise good file.
    const halfPair = await withAdapter((a) => a);
    const { parseSafetensors, toFloat32, writeSafetensors } = await import("@infer/formats");
    const file = parseSafetensors(await readFile(join(halfPair, "adapter_model.safetensors")));
    const kept = [...file.tensors.values()].filter((t) => !t.name.endsWith("layers.1.self_attn.v_proj.lora_B.weight"));
    await writeFile(
      join(halfPair, "adapter_model.safetensors"),
      writeSafetensors(kept.map((t) => ({ name: t.name, dtype: "F32" as const, shape: t.shape, data: toFloat32(t) }))),
    );
    await assert.rejects(readLoraAdapter(halfPair), rejectsWith("MODEL_FORMAT", "layers.1.self_attn.v_proj.lora_A", "lora_B"));

    const unknown = join(dir, "unknown-tensor");
    await cp(PEFT_ADAPTER, unknown, { recursive: true });
    await writeFile(
      join(unknown, "adapter_model.safetensors"),
      writeSafetensors([{ name: "base_model.model.lm_head.lora_A.weight", dtype: "F32", shape: [4, 128], data: new Float32Array(512) }]),
    );
    await assert.rejects(readLoraAdapter(unknown), rejectsWith("UNSUPPORTED", "lm_head"));
  });

  test("a GGUF file that is no adapter, and a path that is nothing, are refused", { skip }, async () => {
    await assert.rejects(readLoraAdapter(join(SHARED_MODELS, "stories260K", "stories260K.gguf")), rejectsWith("MODEL_FORMAT", "general.type"));
    await assert.rejects(readLoraAdapter(join(dir, "nothing-here")), rejectsWith("MODEL_NOT_FOUND", "nothing-here"));
  });

  describe("adapters that do not fit the model", { skip }, () => {
    let loaded: LoadedTransformer;
    before(async () => {
      loaded = await loadTransformer(TINYSTORIES);
    });
    const fit = (adapter: LoraAdapter) => loraDeltas(adapter, { config: loaded.transformer.config, format: loaded.format, matrices: loaded.matrices });

    test("shapes, layers and modules are checked against the base, naming what the adapter was made for", async () => {
      const adapter = await readPeftFolder(PEFT_ADAPTER);
      const narrower = { ...adapter, pairs: adapter.pairs.map((p) => ({ ...p, inFeatures: 64, a: p.a.subarray(0, p.rank * 64) })) };
      assert.throws(() => fit(narrower), rejectsWith("MODEL_FORMAT", "[128, 64]", "tinystories-656k"));
      const deeper = { ...adapter, pairs: [...adapter.pairs, { ...adapter.pairs[0]!, layer: 7 }] };
      assert.throws(() => fit(deeper), rejectsWith("MODEL_FORMAT", "layer 7", "2 layers"));
      const ggufOfAnother = { ...adapter, architecture: "qwen2" };
      assert.throws(() => fit(ggufOfAnother), rejectsWith("MODEL_FORMAT", "general.architecture", "qwen2"));
    });

    test("through loadModel: the load fails with the code, and a differently named base only warns", async () => {
      const wrongShape = await withAdapter((a) => ({ ...a, pairs: a.pairs.map((p) => ({ ...p, outFeatures: 32, b: p.b.subarray(0, 32 * p.rank) })) }));
      await assert.rejects(loadModel(TINYSTORIES, { backend: "wasm", adapterPath: wrongShape }), rejectsWith("MODEL_FORMAT", wrongShape, "[32, 128]"));
      const renamed = await withConfig((c) => (c.base_model_name_or_path = "HuggingFaceTB/SmolLM2-135M"));
      const model = await loadModel(TINYSTORIES, { backend: "wasm", adapterPath: renamed });
      try {
        assert.ok(model.info().warnings?.some((w) => w.includes("SmolLM2-135M")), JSON.stringify(model.info().warnings));
        assert.ok((await model.generateText("Once", { maxTokens: 3, temperature: 0 })).tokens.length > 0);
      } finally {
        await model.close();
      }
    });
  });
});
