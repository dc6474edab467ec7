/**
 * The README's backend table states each backend's capabilities in words a
 * reader sees first; they must be the ones the backend reports. The CLI is
 * where both backend packages meet, so the check lives here.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { type Backend, CAPABILITY_IDS, capabilitiesOf, type CapabilityStatus } from "@infer/core";
import { llamaCppBackend } from "@infer/llama-cpp";
import { remoteBackend } from "@infer/remote";
import { wasmBackend } from "@infer/wasm";

/** Compiled tests run from packages/cli/dist/test/, four levels below the repository root. */
const README = new URL("../../../../README.md", import.meta.url);
const LISTED: readonly CapabilityStatus[] = ["supported", "experimental", "planned"];

/** The status cell of `backend`'s row: "<status>: `id`, `id` (words); <status>: ..." segments. */
function statusCell(readme: string, backend: string): string {
  const row = readme.split("\n").find((line) => line.startsWith(`| \`${backend}\` |`));
  assert.ok(row, `the README's backend table has no row for ${backend}`);
  const cells = row.split("|").map((cell) => cell.trim());
  return cells[cells.length - 2]!;
}

/** The capability ids the cell lists under each status. */
function listedCapabilities(cell: string): Record<string, string[]> {
  const listed: Record<string, string[]> = {};
  for (const segment of cell.split(/;|\.\s/)) {
    const status = /^\s*(\w+):/.exec(segment)?.[1];
    if (!status || !(LISTED as string[]).includes(status)) continue;
    listed[status] = [...segment.matchAll(/`([a-z.]+)`/g)].map((m) => m[1]!).sort();
  }
  return listed;
}

for (const backend of [wasmBackend, llamaCppBackend, remoteBackend] as Backend[]) {
  test(`README: the ${backend.name} row lists the capabilities the backend reports`, () => {
    const report = capabilitiesOf(backend);
    const expected: Record<string, string[]> = {};
    for (const status of LISTED) {
      const ids = CAPABILITY_IDS.filter((id) => report[id] === status);
      if (ids.length > 0) expected[status] = [...ids].sort();
    }
    assert.deepEqual(listedCapabilities(statusCell(readFileSync(README, "utf8"), backend.name)), expected);
  });
}
