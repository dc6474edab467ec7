// JSON mutations: a value somewhere in the document replaced by a hostile one (wrong type, boundary number,
// huge or deeply nested), a key dropped or renamed, or the text itself broken. Used for config.json,
// tokenizer.json, tokenizer_config.json, safetensors headers and HTTP request bodies.
import { mutateBytes } from "./mutate-bytes.mjs";

const NUMBERS = [0, -1, 1, -0, 0.5, 1e-300, 1e308, -1e308, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53 + 2, 65535, 1e6];

/** Nested arrays `depth` deep, written as text (deeper than JSON.stringify's stack allows). */
export const deepArray = (depth) => "[".repeat(depth) + "]".repeat(depth);

function hostileValue(r, original) {
  return r.weighted([
    [4, () => r.pick(NUMBERS)],
    [2, () => r.pick([null, true, false, "", "x", "\u0000", "\ud800", "0", "NaN", "-1"])],
    [2, () => r.pick([[], {}, [original], { value: original }, [null], [-1, -1]])],
    [1, () => "x".repeat(r.pick([256, 65536, 1 << 20]))],
    [1, () => Array.from({ length: r.pick([1000, 100000]) }, (_, i) => i)],
    [1, () => (typeof original === "number" ? -original : typeof original === "string" ? original.repeat(2) + "\u0301" : original)],
    [1, () => ({ [DEEP]: r.pick([1000, 100000]) })],
  ])();
}

/** Marker object: replaced by a deeply nested array after stringifying. */
const DEEP = "__fuzz_deep__";

/** All [container, key] slots of a JSON value, parents before children; `limit` bounds big documents. */
function slots(root, limit = 20000) {
  const out = [];
  const walk = (value, depth) => {
    if (out.length >= limit || value === null || typeof value !== "object") return;
    for (const key of Object.keys(value)) {
      out.push({ container: value, key, depth });
      walk(value[key], depth + 1);
    }
  };
  walk(root, 0);
  return out;
}

/**
 * Mutates a JSON document. `prefer` (a regexp over keys) biases the choice towards the fields that matter
 * (a config's sizes, a request's options). Returns the new text and a tag.
 */
export function mutateJsonText(r, text, prefer) {
  if (r.chance(0.15)) {
    const mutant = mutateBytes(r, Buffer.from(text));
    return { text: mutant.bytes.toString("latin1"), tags: mutant.tags.map((t) => `json.${t}`), raw: mutant.bytes };
  }
  const doc = JSON.parse(text);
  const { doc: mutated, tags } = mutateJsonValue(r, doc, prefer);
  let out = JSON.stringify(mutated);
  out = out.replace(/\{"__fuzz_deep__":(\d+)\}/g, (_, depth) => deepArray(Number(depth)));
  return { text: out, tags };
}

export function mutateJsonValue(r, doc, prefer) {
  const all = slots(doc);
  if (all.length === 0) return { doc: hostileValue(r, doc), tags: ["json.root"] };
  const preferred = prefer ? all.filter((s) => prefer.test(s.key)) : [];
  const count = 1 + (r.chance(0.3) ? r.int(3) : 0);
  const tags = [];
  for (let i = 0; i < count; i++) {
    // Shallow slots first most of the time: that is where the schema lives.
    const slot = preferred.length > 0 && r.chance(0.6) ? r.pick(preferred) : r.pick(r.chance(0.5) ? all.filter((s) => s.depth < 2) : all);
    const { container, key } = slot;
    const action = r.weighted([[6, "replace"], [2, "delete"], [1, "rename"], [1, "swap"]]);
    if (action === "replace") {
      container[key] = hostileValue(r, container[key]);
    } else if (action === "delete") {
      if (Array.isArray(container)) container.splice(Number(key), 1);
      else delete container[key];
    } else if (action === "rename" && !Array.isArray(container)) {
      container[`${key}_`] = container[key];
      delete container[key];
    } else {
      // A copy: assigning an ancestor itself would make a cycle.
      container[key] = JSON.parse(JSON.stringify(r.pick(all).container));
    }
    tags.push(`json.${action}[${key}]`);
  }
  return { doc, tags };
}
