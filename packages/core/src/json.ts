import { InferenceError } from "./errors.js";

/**
 * How deeply model files' JSON (config.json, tokenizer.json, safetensors
 * headers, ...) may nest. Real files nest fewer than ten levels; the bound
 * keeps recursive readers and error formatting (which walk what they are
 * given) far from the call stack's limit.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * `JSON.parse` for files that describe a model: text that is not JSON, or
 * that nests arrays and objects deeper than `maxDepth`, is `MODEL_FORMAT`
 * naming `source` (the file, or the file and field). The depth is checked on
 * the text before parsing, so a hostile file is refused before anything is
 * built from it.
 */
export function parseModelJson(text: string, source: string, maxDepth = MAX_JSON_DEPTH): unknown {
  const depth = jsonDepth(text, maxDepth);
  if (depth > maxDepth) {
    throw new InferenceError("MODEL_FORMAT", `${source}: JSON nests deeper than ${maxDepth} levels`, {
      details: { file: source, maxDepth },
    });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new InferenceError("MODEL_FORMAT", `${source}: not valid JSON: ${(error as Error).message}`, {
      cause: error,
      details: { file: source },
    });
  }
}

/**
 * The deepest nesting of `[` and `{` outside strings, scanning no further
 * than the first place it exceeds `limit`. Malformed text is left to
 * `JSON.parse` to report.
 */
function jsonDepth(text: string, limit: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return deepest;
}

/**
 * A short, bounded description of a value for an error message: a string
 * quoted and cut, a number or boolean as written, an array by its length,
 * anything else by its type. Never walks into the value, so a huge or deeply
 * nested value cannot make the message itself fail or grow without bound.
 */
export function describeValue(value: unknown, maxChars = 60): string {
  if (typeof value === "string") {
    return JSON.stringify(value.length > maxChars ? `${value.slice(0, maxChars)}…` : value);
  }
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  if (value === null) return "null";
  if (Array.isArray(value)) return `array of ${value.length}`;
  return typeof value;
}
