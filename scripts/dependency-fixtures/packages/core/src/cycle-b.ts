import type { A } from "./cycle-a.js";

export interface B {
  a?: A;
}
