import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { createService, InferenceError, register, servedModel, unregister } from "../src/index.js";
import { assertCode } from "../src/testing/index.js";
import { FakeBackend, type FakeModel } from "./fake-backend.js";

const backend = new FakeBackend({ name: "fake-service", model: { eosAfter: 6 } });
register(backend);
after(() => unregister("fake-service"));

const loadsOf = (path: string) => backend.loaded.filter((l) => l.path === path).length;
const modelClosed = (model: FakeModel) => model.disposeCount > 0;
const stateOf = (service: ReturnType<typeof createService>, name: string) => service.status().find((s) => s.name === name)!;

describe("createService", () => {
  it("shares one load between concurrent first calls", async () => {
    const service = createService({ models: { a: "concurrent.fake" }, defaultBackend: "fake-service" });
    const leases = await Promise.all([service.acquire("a"), service.acquire("a"), service.acquire("a")]);
    assert.equal(loadsOf("concurrent.fake"), 1);
    assert.ok(leases.every((lease) => lease.model === leases[0]!.model));
    assert.equal(stateOf(service, "a").inUse, 3);
    for (const lease of leases) lease.release();
    assert.equal(stateOf(service, "a").inUse, 0);
    await service.close();
    assert.ok(modelClosed(leases[0]!.model as FakeModel));
  });

  it("unloads the least recently used idle model to stay under maxLoadedBytes", async () => {
    const models = { a: { source: "lru-a.fake", bytes: 100 }, b: { source: "lru-b.fake", bytes: 100 }, c: { source: "lru-c.fake", bytes: 100 } };
    const service = createService({ models, defaultBackend: "fake-service", maxLoadedBytes: 200 });
    const seen: Record<string, FakeModel> = {};
    for (const name of ["a", "b", "a"]) await service.use(name, async (model) => void (seen[name] = model as FakeModel));
    await service.use("c", async (model) => void (seen.c = model as FakeModel));
    // b was used longer ago than a, so it went; the total stays within the budget.
    assert.equal(stateOf(service, "b").state, "unloaded");
    assert.ok(modelClosed(seen.b!));
    assert.equal(stateOf(service, "a").state, "loaded");
    assert.equal(stateOf(service, "c").state, "loaded");
    assert.equal(service.status().reduce((sum, s) => sum + s.bytes, 0), 200);
    // Using b again loads it anew (and pushes out a, now the least recent).
    await service.use("b", async () => undefined);
    assert.equal(loadsOf("lru-b.fake"), 2);
    assert.equal(stateOf(service, "a").state, "unloaded");
    await service.close();
  });

  it("never unloads a model in use, and makes room once it is released", async () => {
    const models = { a: { source: "busy-a.fake", bytes: 100 }, b: { source: "busy-b.fake", bytes: 100 } };
    const service = createService({ models, defaultBackend: "fake-service", maxLoadedBytes: 100 });
    const held = await service.acquire("a");
    const text = await service.use("b", async (model) => (await model.generateText("ab", { maxTokens: 3, temperature: 0 })).text);
    assert.ok(text.length > 0);
    assert.equal(stateOf(service, "a").state, "loaded", "a was in use, so it stayed although over budget");
    assert.ok(!modelClosed(held.model as FakeModel));
    // b is idle: released now, and a still runs.
    assert.equal((await held.model.generateText("ab", { maxTokens: 2, temperature: 0 })).tokens.length, 2);
    held.release();
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(service.status().reduce((sum, s) => sum + s.bytes, 0) <= 100);
    assert.equal(await service.unload("a").then(() => stateOf(service, "a").state), "unloaded");
    await service.close();
  });

  it("reports a failed load and tries again on the next call", async () => {
    let attempts = 0;
    const load = async () => {
      attempts++;
      if (attempts === 1) throw new InferenceError("IO", "disk went away");
      return backend.loadModel("retry.fake");
    };
    const service = createService({ models: { a: { load } } });
    const failures = await Promise.allSettled([service.acquire("a"), service.acquire("a")]);
    assert.deepEqual(failures.map((f) => f.status), ["rejected", "rejected"]);
    assert.equal(attempts, 1, "concurrent callers share the failing load too");
    assert.deepEqual(stateOf(service, "a"), { name: "a", state: "unloaded", bytes: 0, inUse: 0, lastUsedAt: stateOf(service, "a").lastUsedAt, error: { code: "IO", message: "disk went away" } });
    const result = await service.use("a", (model) => model.generateText("abc", { maxTokens: 2, temperature: 0 }));
    assert.equal(result.tokens.length, 2);
    assert.equal(attempts, 2);
    assert.equal(stateOf(service, "a").error, undefined);
    await service.close();
  });

  it("unloads a model idle for idleUnloadMs", async () => {
    const service = createService({ models: { a: "idle.fake" }, defaultBackend: "fake-service", idleUnloadMs: 10 });
    const model = await service.use("a", async (m) => m as FakeModel);
    assert.equal(stateOf(service, "a").state, "loaded");
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(stateOf(service, "a").state, "unloaded");
    assert.ok(modelClosed(model));
    await service.close();
  });

  it("rejects unknown names, bad options and calls after close with stable codes", async () => {
    assert.throws(() => createService({ models: {} }), (e: unknown) => e instanceof InferenceError && e.code === "INVALID_OPTION");
    assert.throws(() => createService({ models: { a: "x.fake" }, maxLoadedBytes: -1 }), /maxLoadedBytes/);
    const service = createService({ models: { a: "x.fake" }, defaultBackend: "fake-service" });
    await assertCode(service.acquire("nope"), "MODEL_NOT_FOUND");
    await service.close();
    await assertCode(service.acquire("a"), "CLOSED");
  });
});

describe("servedModel", () => {
  it("is the service's model: calls hold it, and an unloaded model loads again on the next call", async () => {
    const service = createService({ models: { a: "served.fake" }, defaultBackend: "fake-service" });
    const model = await servedModel(service, "a");
    const direct = await backend.loadModel("direct.fake");
    const expected = (await direct.generateText("hello", { maxTokens: 5, temperature: 0 })).text;
    assert.equal((await model.generateText("hello", { maxTokens: 5, temperature: 0 })).text, expected);
    await service.unload("a");
    let streamed = "";
    for await (const token of model.generate("hello", { maxTokens: 5, temperature: 0 })) {
      streamed += token.text;
      assert.equal(stateOf(service, "a").inUse, 1, "a stream holds the model");
    }
    assert.equal(streamed, expected);
    assert.equal(loadsOf("served.fake"), 2);
    assert.equal(stateOf(service, "a").inUse, 0);
    await direct.close();
    await service.close();
  });
});
