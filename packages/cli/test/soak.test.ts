/**
 * The standing soak (`npm run soak`, scripts/soak) in its short form: the real
 * `infer serve` on both backends under a mixed load with disconnects,
 * malformed and slow requests. The soak exits non-zero on any violation (a
 * 5xx, a malformed answer, a slot not freed, memory growth over its bound),
 * so this test fails whenever the soak does; the figures it reports are
 * checked for having actually exercised the server.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

const root = fileURLToPath(new URL("../../../../", import.meta.url));

interface SoakResult {
  backend: string;
  requests: number;
  statuses: Record<string, number>;
  byKind: Record<string, { count: number }>;
  memory: { samples: number; growthAfterWarmupMiB: number };
  disconnectProbes: { count: number; maxTokensAfterNotice?: number };
  violations: string[];
}

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(root, "scripts/soak/soak.mjs"), ...args], { cwd: root });
    let output = "";
    child.stdout.on("data", (b: Buffer) => (output += b.toString()));
    child.stderr.on("data", (b: Buffer) => (output += b.toString()));
    child.on("close", (code) => resolve({ code, output }));
  });
}

test("npm run soak, short: both backends, 10 workers, no violation", { timeout: 300_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), "infer-soak-test-"));
  try {
    const json = join(dir, "soak.json");
    const { code, output } = await run(["--seconds", "15", "--concurrency", "10", "--backend", "both", "--json", json]);
    assert.equal(code, 0, `the soak failed:\n${output}`);
    const results = JSON.parse(await readFile(json, "utf8")) as SoakResult[];
    assert.deepEqual(results.map((r) => r.backend), ["wasm", "llama_cpp"]);
    for (const r of results) {
      assert.deepEqual(r.violations, []);
      assert.ok(r.requests >= 100, `${r.backend}: only ${r.requests} requests`);
      assert.ok(!Object.keys(r.statuses).some((s) => s.startsWith("5")), `${r.backend}: ${JSON.stringify(r.statuses)}`);
      // Each malformed kind is about 1% of the mix: a short run on a slow machine can miss any one of them.
      const count = (prefix: string) => Object.entries(r.byKind).reduce((n, [kind, k]) => n + (kind.startsWith(prefix) ? k.count : 0), 0);
      for (const kind of ["completion stream", "disconnect", "malformed: ", "stalled headers"]) {
        assert.ok(count(kind) > 0, `${r.backend}: no '${kind}' requests in ${JSON.stringify(Object.keys(r.byKind))}`);
      }
      assert.ok(r.disconnectProbes.count >= 3, `${r.backend}: ${r.disconnectProbes.count} disconnect probes`);
      assert.ok(r.disconnectProbes.maxTokensAfterNotice! <= 1);
      assert.ok(r.memory.samples >= 10);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
