// Breaks no-folder-cycle with no file cycle: engine/run.ts -> arch/model.ts, arch/layer.ts -> engine/scale.ts.
import { model } from "../arch/model.js";

export const run = () => model;
