// Allowed: core's node/ folder is not portable.
import { stat } from "node:fs/promises";

export const exists = stat;
