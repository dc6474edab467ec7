import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, beforeEach, describe, it } from "node:test";
import {
  defaultLoRAConfig,
  type Backend,
  BACKEND_PREFERENCE,
  defaultBackend,
  getBackend,
  getHost,
  InferenceError,
  listBackends,
  type LoadOptions,
  loadModel,
  loadTrainable,
  register,
  setHost,
  unregister,
} from "../src/index.js";
import { nodeHost } from "../src/node/index.js";
import { assertCode } from "../src/testing/index.js";
import { FakeBackend, FakeModel } from "./fake-backend.js";
import { ggufHeader } from "./gguf-fixture.js";

const dir = mkdtempSync(join(tmpdir(), "infer-registry-"));
const modelPath = join(dir, "tiny.fake");
const corruptPath = join(dir, "corrupt.fake");
const ggufPath = join(dir, "model.gguf");
writeFileSync(modelPath, "FAKE");
writeFileSync(corruptPath, "JUNK");
writeFileSync(ggufPath, ggufHeader({ architecture: "llama", fileType: 1 }));
after(() => rmSync(dir, { recursive: true, force: true }));

function clearRegistry(): void {
  for (const name of listBackends()) unregister(name);
}

beforeEach(() => {
  clearRegistry();
  setHost(nodeHost);
});

describe("registration", () => {
  it("importing @infer/core/node installs the Node host", () => {
    assert.equal(getHost(), nodeHost);
  });

  it("the last registration of a name wins", () => {
    const first = new FakeBackend({ name: "wasm" });
    const second = new FakeBackend({ name: "wasm" });
    register(first);
    register(second);
    assert.equal(getBackend("wasm"), second);
    assert.deepEqual(listBackends(), ["wasm"]);
  });

  it("listBackends is sorted by name", () => {
    for (const name of ["wasm", "cuda", "zeta", "llama_cpp", "alpha"]) register(new FakeBackend({ name }));
    assert.deepEqual(listBackends(), ["alpha", "cuda", "llama_cpp", "wasm", "zeta"]);
    assert.equal(unregister("zeta"), true);
    assert.equal(unregister("zeta"), false);
    assert.deepEqual(listBackends(), ["alpha", "cuda", "llama_cpp", "wasm"]);
  });

  it("a backend without a name is refused with INVALID_OPTION", () => {
    assert.throws(() => register({ name: "" } as Backend), (e: Error & { code?: string }) => e.code === "INVALID_OPTION");
    assert.throws(() => register(undefined as unknown as Backend), /non-empty name/);
  });

  it("BACKEND_NOT_FOUND lists the registered backends", async () => {
    assert.throws(() => getBackend("cuda"), /registered: none/);
    register(new FakeBackend({ name: "wasm" }));
    register(new FakeBackend({ name: "llama_cpp" }));
    const error = await assertCode(loadModel(modelPath, { backend: "metal" }), "BACKEND_NOT_FOUND");
    assert.match(error.message, /'metal'/);
    assert.match(error.message, /registered: llama_cpp, wasm/);
  });
});

describe("defaultBackend", () => {
  it("prefers metal, cuda, rocm, llama_cpp, wasm in that order, skipping unavailable ones", async () => {
    assert.deepEqual([...BACKEND_PREFERENCE], ["metal", "cuda", "rocm", "llama_cpp", "wasm"]);
    register(new FakeBackend({ name: "aardvark" }));
    register(new FakeBackend({ name: "wasm" }));
    register(new FakeBackend({ name: "llama_cpp" }));
    register(new FakeBackend({ name: "cuda", available: false }));
    register(new FakeBackend({ name: "metal", available: false }));
    assert.equal((await defaultBackend())?.name, "llama_cpp");
    register(new FakeBackend({ name: "rocm" }));
    assert.equal((await defaultBackend())?.name, "rocm");
    register(new FakeBackend({ name: "cuda" }));
    assert.equal((await defaultBackend())?.name, "cuda");
  });

  it("falls back to any available backend, alphabetically, and to undefined when none is", async () => {
    assert.equal(await defaultBackend(), undefined);
    register(new FakeBackend({ name: "wasm", available: false }));
    register(new FakeBackend({ name: "zed" }));
    register(new FakeBackend({ name: "mine" }));
    assert.equal((await defaultBackend())?.name, "mine");
    unregister("mine");
    unregister("zed");
    assert.equal(await defaultBackend(), undefined);
  });

  it("a backend whose available() throws counts as unavailable", async () => {
    const broken = new FakeBackend({ name: "metal" });
    broken.available = () => {
      throw new Error("no GPU driver");
    };
    register(broken);
    register(new FakeBackend({ name: "wasm" }));
    assert.equal((await defaultBackend())?.name, "wasm");
  });
});

describe("loadModel", () => {
  it("uses the first available backend, in preference order, that can load the file", async () => {
    const metal = new FakeBackend({ name: "metal", available: false });
    const llama = new FakeBackend({ name: "llama_cpp", extension: ".gguf" });
    const wasm = new FakeBackend({ name: "wasm" });
    const other = new FakeBackend({ name: "other" });
    for (const b of [metal, llama, wasm, other]) register(b);
    const model = await loadModel(modelPath, { contextLength: 64 });
    assert.equal(model.backend, "wasm");
    assert.deepEqual(wasm.loaded, [{ path: modelPath, options: { contextLength: 64 } }]);
    assert.equal(metal.loaded.length + llama.loaded.length + other.loaded.length, 0);
    const gguf = await loadModel(ggufPath);
    assert.equal(gguf.backend, "llama_cpp");
    await model.close();
    await gguf.close();
  });

  it("a canLoad that throws is treated as 'cannot load'", async () => {
    const picky = new FakeBackend({ name: "llama_cpp" });
    picky.canLoad = async () => {
      throw new Error("cannot read header");
    };
    register(picky);
    register(new FakeBackend({ name: "wasm" }));
    const model = await loadModel(modelPath);
    assert.equal(model.backend, "wasm");
    await model.close();
  });

  it("a pinned backend is used even when another is preferred", async () => {
    register(new FakeBackend({ name: "llama_cpp" }));
    register(new FakeBackend({ name: "wasm" }));
    const model = await loadModel(modelPath, { backend: "wasm" });
    assert.equal(model.backend, "wasm");
    await model.close();
  });

  it("BACKEND_UNAVAILABLE says why", async () => {
    register(new FakeBackend({ name: "cuda", available: false, unavailableReason: "no CUDA device found" }));
    const error = await assertCode(loadModel(modelPath, { backend: "cuda" }), "BACKEND_UNAVAILABLE");
    assert.match(error.message, /'cuda'.*no CUDA device found/);
    const noReason: Backend = {
      name: "rocm",
      available: () => false,
      canLoad: async () => true,
      loadModel: async () => new FakeModel(),
    };
    register(noReason);
    const bare = await assertCode(loadModel(modelPath, { backend: "rocm" }), "BACKEND_UNAVAILABLE");
    assert.match(bare.message, /reported itself unavailable/);
  });

  it("NO_BACKEND_FOR_FORMAT names the detected format and the backends", async () => {
    register(new FakeBackend({ name: "wasm" }));
    register(new FakeBackend({ name: "llama_cpp", available: false, extension: ".gguf" }));
    const error = await assertCode(loadModel(ggufPath), "NO_BACKEND_FOR_FORMAT");
    assert.match(error.message, /detected format: gguf/);
    assert.match(error.message, /llama_cpp, wasm/);
    clearRegistry();
    const none = await assertCode(loadModel(ggufPath), "NO_BACKEND_FOR_FORMAT");
    assert.match(none.message, /registered backends: none/);
  });

  it("MODEL_NOT_FOUND for a missing path (with a host); INVALID_OPTION for a bad path or options", async () => {
    register(new FakeBackend({ name: "wasm" }));
    const missing = join(dir, "missing.fake");
    const error = await assertCode(loadModel(missing), "MODEL_NOT_FOUND");
    assert.match(error.message, /missing\.fake/);
    await assertCode(loadModel(""), "INVALID_OPTION");
    await assertCode(loadModel(modelPath, { threads: 0 }), "INVALID_OPTION");
    await assertCode(loadModel(modelPath, { nonsense: true } as object), "INVALID_OPTION");
    // Without a host (a browser) the path is not checked here; the backend decides.
    setHost(undefined);
    const model = await loadModel(missing);
    assert.equal(model.backend, "wasm");
    await model.close();
  });

  it("an http(s) URL is not looked for on disk; a server URL no backend takes is format remote", async () => {
    register(new FakeBackend({ name: "wasm" }));
    const server = await assertCode(loadModel("http://127.0.0.1:9/v1"), "NO_BACKEND_FOR_FORMAT");
    assert.match(server.message, /detected format: remote/);
    // A model file's URL is for a backend that fetches files (loadSource), which this fake lacks.
    const file = await assertCode(loadModel("https://example.com/models/x.gguf"), "NO_BACKEND_FOR_FORMAT");
    assert.match(file.message, /no available backend loads a model from https:\/\/example\.com\/models\/x\.gguf/);
  });

  it("anything else a backend throws while loading becomes INTERNAL naming the backend and path", async () => {
    const crashing = new FakeBackend({ name: "wasm" });
    const cause = new RangeError("offset out of bounds");
    crashing.loadModel = async () => {
      throw cause;
    };
    register(crashing);
    const error = await assertCode(loadModel(modelPath), "INTERNAL");
    assert.match(error.message, /backend 'wasm' failed to load '.*tiny\.fake': offset out of bounds/);
    assert.equal(error.cause, cause);
    const pinned = await assertCode(loadModel(modelPath, { backend: "wasm" }), "INTERNAL");
    assert.equal(pinned.cause, cause);
  });

  it("an unavailableReason that throws still gives BACKEND_UNAVAILABLE", async () => {
    const odd = new FakeBackend({ name: "cuda", available: false });
    odd.unavailableReason = () => {
      throw new Error("driver query failed");
    };
    register(odd);
    const error = await assertCode(loadModel(modelPath, { backend: "cuda" }), "BACKEND_UNAVAILABLE");
    assert.match(error.message, /driver query failed/);
  });

  it("MODEL_FORMAT from the backend reaches the caller unchanged", async () => {
    register(new FakeBackend({ name: "wasm" }));
    const error = await assertCode(loadModel(corruptPath), "MODEL_FORMAT");
    assert.match(error.message, /corrupt\.fake/);
  });
});

describe("loadModel from a URL, a Blob or bytes", () => {
  /** A fake backend that also loads sources, recording what it was given. */
  function sourceBackend(name: string): Backend & { sources: unknown[] } {
    const base = new FakeBackend({ name });
    const sources: unknown[] = [];
    return Object.assign(base, {
      sources,
      loadSource: async (source: unknown) => {
        sources.push(source);
        return new FakeModel(name);
      },
    });
  }

  it("goes to the first available backend with loadSource, the source untouched", async () => {
    const llama = new FakeBackend({ name: "llama_cpp" });
    const wasm = sourceBackend("wasm");
    register(llama);
    register(wasm);
    const bytes = new Uint8Array([71, 71, 85, 70]);
    const blob = new Blob([bytes]);
    for (const source of ["https://example.org/m.gguf", new URL("http://127.0.0.1/m/"), blob, bytes, bytes.buffer]) {
      const model = await loadModel(source);
      assert.equal(model.backend, "wasm");
      await model.close();
    }
    assert.equal(wasm.sources.length, 5);
    assert.equal(wasm.sources[2], blob);
    assert.equal(llama.loaded.length, 0);
  });

  it("a pinned backend without loadSource refuses with UNSUPPORTED; none at all is NO_BACKEND_FOR_FORMAT", async () => {
    register(new FakeBackend({ name: "llama_cpp" }));
    const error = await assertCode(loadModel("https://example.org/m.gguf", { backend: "llama_cpp" }), "UNSUPPORTED");
    assert.match(error.message, /llama_cpp.*file paths only.*https:\/\/example\.org\/m\.gguf/);
    const none = await assertCode(loadModel(new Uint8Array(8)), "NO_BACKEND_FOR_FORMAT");
    assert.match(none.message, /8 bytes in memory/);
  });

  it("a file: URL is a path; anything else is INVALID_OPTION", async () => {
    const fake = new FakeBackend({ name: "wasm" });
    register(fake);
    const model = await loadModel(new URL(`file://${modelPath}`));
    await model.close();
    assert.deepEqual(fake.loaded.map((l) => l.path), [modelPath]);
    await assertCode(loadModel(42 as unknown as string), "INVALID_OPTION");
    await assertCode(loadModel(new URL("ftp://example.org/m.gguf")), "INVALID_OPTION");
  });
});

describe("loadTrainable", () => {
  it("TRAINING_UNSUPPORTED closes the model it loaded", async () => {
    const wasm = new FakeBackend({ name: "wasm" });
    register(wasm);
    const error = await assertCode(loadTrainable(modelPath), "TRAINING_UNSUPPORTED");
    assert.match(error.message, /wasm/);
    assert.equal(wasm.models.length, 1);
    assert.equal(wasm.models[0]!.isClosed, true);
    assert.equal(wasm.models[0]!.disposeCount, 1);
  });

  it("returns a model that implements training", async () => {
    class TrainableFake extends FakeModel {
      readonly numLayers = 1;
      applyLoRA() {
        return { totalParams: 0, save: async () => undefined };
      }
      async trainStep() {
        return { loss: 1 };
      }
      async evaluateLoss() {
        return { loss: 1, tokens: 1 };
      }
      trainingState() {
        return { steps: 0, rng: [0, 0, 0, 0], config: defaultLoRAConfig(), tensors: [] };
      }
      restoreTrainingState() {}
    }
    const backend = new FakeBackend({ name: "wasm" });
    backend.loadModel = async () => new TrainableFake("wasm");
    register(backend);
    const model = await loadTrainable(modelPath);
    assert.equal((await model.trainStep({ inputIds: [[0, 1]] })).loss, 1);
    await model.close();
  });
});

describe("loadModel and Backend.fasterBackendFor", () => {
  /** A GGUF backend that names `faster` (and records what it was asked) for every file. */
  function naming(faster: string | undefined): FakeBackend & Required<Pick<Backend, "fasterBackendFor">> & { asked: unknown[] } {
    const asked: unknown[] = [];
    return Object.assign(new FakeBackend({ name: "llama_cpp", extension: ".gguf" }), {
      asked,
      fasterBackendFor: async (path: string, options: LoadOptions) => {
        asked.push({ path, options });
        return faster;
      },
    });
  }

  it("loads with the faster backend the chosen one names, passing the options", async () => {
    const llama = naming("wasm");
    const wasm = new FakeBackend({ name: "wasm", extension: ".gguf" });
    register(llama);
    register(wasm);
    const model = await loadModel(ggufPath, { contextLength: 64 });
    assert.equal(model.backend, "wasm");
    assert.deepEqual(llama.asked, [{ path: ggufPath, options: { contextLength: 64 } }]);
    assert.deepEqual(wasm.loaded, [{ path: ggufPath, options: { contextLength: 64 } }]);
    assert.equal(llama.loaded.length, 0);
    await model.close();
  });

  it("stays with the chosen backend when the named one is missing, unavailable, cannot read the file or fails", async () => {
    const cases: [string, Backend | undefined][] = [
      ["missing", undefined],
      ["unavailable", new FakeBackend({ name: "wasm", extension: ".gguf", available: false })],
      ["cannot read", new FakeBackend({ name: "wasm", extension: ".fake" })],
      ["fails", Object.assign(new FakeBackend({ name: "wasm", extension: ".gguf" }), {
        loadModel: async () => {
          throw new InferenceError("UNSUPPORTED_ARCHITECTURE", "not this one");
        },
      })],
    ];
    for (const [why, wasm] of cases) {
      clearRegistry();
      const llama = naming("wasm");
      register(llama);
      if (wasm) register(wasm);
      const model = await loadModel(ggufPath);
      assert.equal(model.backend, "llama_cpp", why);
      assert.equal(llama.loaded.length, 1, why);
      await model.close();
    }
  });

  it("naming none or itself keeps the chosen backend; a pinned backend is not asked", async () => {
    for (const faster of [undefined, "llama_cpp"]) {
      clearRegistry();
      const llama = naming(faster);
      register(llama);
      register(new FakeBackend({ name: "wasm", extension: ".gguf" }));
      const model = await loadModel(ggufPath);
      assert.equal(model.backend, "llama_cpp");
      await model.close();
    }
    clearRegistry();
    const llama = naming("wasm");
    register(llama);
    register(new FakeBackend({ name: "wasm", extension: ".gguf" }));
    const pinned = await loadModel(ggufPath, { backend: "llama_cpp" });
    assert.equal(pinned.backend, "llama_cpp");
    assert.equal(llama.asked.length, 0);
    await pinned.close();
  });

  it("an error from fasterBackendFor (a refused setting) reaches the caller", async () => {
    const llama = Object.assign(new FakeBackend({ name: "llama_cpp", extension: ".gguf" }), {
      fasterBackendFor: async (): Promise<string | undefined> => {
        throw new InferenceError("INVALID_OPTION", "INFER_GGUF_BACKEND=gpu: expected ...");
      },
    });
    register(llama);
    await assertCode(loadModel(ggufPath), "INVALID_OPTION");
  });
});
