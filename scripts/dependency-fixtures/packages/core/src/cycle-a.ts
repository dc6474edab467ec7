// Breaks no-file-cycle with type-only imports both ways.
import type { B } from "./cycle-b.js";

export interface A {
  b?: B;
}
