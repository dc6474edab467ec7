import type { Settings } from "./protocol.js";

/** The settings' bounds, as the inputs in index.html state them. */
const BOUNDS = {
  temperature: { min: 0, max: 2, integer: false },
  topP: { min: 0, max: 1, integer: false },
  maxTokens: { min: 1, max: 8192, integer: true },
} as const;

const LABELS: Record<keyof Settings, string> = { temperature: "Temperature", topP: "Top-p", maxTokens: "Max tokens" };

/** Reads the three settings, or says which one is out of range. */
export function readSettings(raw: Record<keyof Settings, string>): Settings | { invalid: string } {
  const settings: Partial<Settings> = {};
  for (const key of Object.keys(BOUNDS) as Array<keyof Settings>) {
    const { min, max, integer } = BOUNDS[key];
    const value = Number(raw[key]);
    if (raw[key].trim() === "" || !Number.isFinite(value) || value < min || value > max || (integer && !Number.isInteger(value))) {
      return { invalid: `${LABELS[key]} must be ${integer ? "a whole number" : "a number"} from ${min} to ${max} (got "${raw[key]}")` };
    }
    settings[key] = value;
  }
  return settings as Settings;
}
