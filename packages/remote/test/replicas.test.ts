import assert from "node:assert/strict";
import { after, test } from "node:test";
import { assertCode } from "@infer/core/testing";
import { loadReplicas } from "../src/index.js";
import { type FakeServer, startFake, streamTokens } from "./fake-server.js";

const servers: FakeServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));
const healthy = (texts: string[]) => async (port?: number) => {
  const server = await startFake((_req, res) => streamTokens(res, texts), { port });
  servers.push(server);
  return server;
};
const until = async (check: () => boolean, what: string) => {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

test("calls go to the replica with the fewest in flight", async () => {
  let hold: (() => void) | undefined;
  const busy = await startFake(async (_req, res) => {
    await new Promise<void>((resolve) => (hold = resolve));
    streamTokens(res, [" slow"]);
  });
  servers.push(busy);
  const idle = await healthy([" fast"])();
  const model = await loadReplicas([`${busy.url}/v1`, `${idle.url}/v1`], {}, { healthIntervalMs: 60_000 });
  // Ties go in turn: the first call lands on `busy` and stays there; the next ones see it busy and go to `idle`.
  const slow = model.generateText("x", { maxTokens: 4 });
  await until(() => hold !== undefined, "the first call to reach its replica");
  for (let i = 0; i < 3; i++) assert.equal((await model.generateText("x", { maxTokens: 4 })).text, " fast");
  assert.equal(busy.completions().length, 1);
  assert.equal(idle.completions().length, 3);
  assert.deepEqual(model.status().map((r) => r.inFlight), [1, 0]);
  hold!();
  assert.equal((await slow).text, " slow");
  await model.close();
});

test("an unreachable replica is taken out, calls move on, and a health check brings it back", async () => {
  const a = await healthy([" a"])();
  const b = await healthy([" b"])();
  const model = await loadReplicas([`${a.url}/v1`, `${b.url}/v1`], {}, { healthIntervalMs: 50 });
  const texts = new Set<string>();
  for (let i = 0; i < 4; i++) texts.add((await model.generateText("x", { maxTokens: 4 })).text);
  assert.deepEqual([...texts].sort(), [" a", " b"], "an idle pair shares the calls");

  await a.close();
  for (let i = 0; i < 4; i++) {
    let streamed = "";
    for await (const token of model.generate("x", { maxTokens: 4 })) streamed += token.text;
    assert.equal(streamed, " b");
    const [batched] = await model.batchGenerate(["x"], { maxTokens: 4 });
    assert.equal(batched!.text, " b");
  }
  assert.equal(model.status()[0]!.healthy, false);

  const revived = await healthy([" a again"])(a.port);
  await until(() => model.status()[0]!.healthy, "the health check to bring the replica back");
  const afterComeback = new Set<string>();
  for (let i = 0; i < 4; i++) afterComeback.add((await model.generateText("x", { maxTokens: 4 })).text);
  assert.ok(afterComeback.has(" a again"), "the revived replica takes calls again");
  assert.ok(revived.completions().length > 0);

  await b.close();
  await revived.close();
  await assertCode(model.generateText("x", { maxTokens: 4 }), "REMOTE_UNAVAILABLE");
  await model.close();
});
