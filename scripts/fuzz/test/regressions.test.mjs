// Replays every saved fuzz reproducer (scripts/fuzz/regressions) on the backend it names, in a child with
// the campaign's limits. A fixed finding must now end typed or generated; one marked "expect": "known-…"
// (reported, fix under way) must still fail in the child, never in this process, so the marker is removed
// once its fix lands.
import assert from "node:assert/strict";
import { basename } from "node:path";
import { after, before, test } from "node:test";
import { BAD } from "../campaign.mjs";
import { createReplayer, listReproducers, seedAvailable } from "../replay.mjs";

const reproducers = listReproducers();
let replayer;
before(async () => {
  replayer = await createReplayer();
});
after(async () => {
  await replayer?.close();
});

test("there are reproducers to replay", () => {
  assert.ok(reproducers.length > 0);
});

for (const reproducer of reproducers) {
  const { meta } = reproducer;
  const name = `${meta.target}/${basename(reproducer.dir)} ends ${meta.expect ? `${meta.outcome} still (known)` : "typed or generated"}`;
  const skip = seedAvailable(meta.seedModel) ? false : `its seed model ${meta.seedModel} is not in ../shared/models`;
  test(name, { skip }, async (t) => {
    let result;
    try {
      result = await replayer.replay(reproducer);
    } catch (error) {
      if (!error.unavailable) throw error;
      t.skip(error.message);
      return;
    }
    if (meta.expect?.startsWith("known-")) {
      assert.ok(BAD.has(result.outcome), `known finding now ends '${result.outcome}': remove "expect" from ${reproducer.dir}/case.json`);
    } else {
      assert.ok(["typed", "generated"].includes(result.outcome), `${result.outcome}: ${result.message ?? result.code}`);
    }
  });
}
