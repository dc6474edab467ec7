import { FakeModel } from "./fake-backend.js";
import { runConformanceSuite } from "../src/testing/index.js";

// The suite against core's toy backend: proves the suite's checks pass for a
// correct model (and, with base-model.test.ts, that they fail for broken ones).
runConformanceSuite({
  name: "fake backend",
  load: async () => new FakeModel(),
  chatMessages: [{ role: "user", content: "tell me a story" }],
  timeoutMs: 10_000,
});
