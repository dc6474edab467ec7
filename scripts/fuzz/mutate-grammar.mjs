// GBNF grammar mutations: constructs that nest, chain, repeat or alternate far past what real grammars do,
// constructs that do not parse, spliced into a valid grammar; plus byte-level changes and cuts of its text.
import { mutateBytes } from "./mutate-bytes.mjs";

/** A small JSON grammar of our own (the shape of llama.cpp's json.gbnf): objects, arrays, strings, numbers. */
export const SEED_GRAMMAR = String.raw`root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws (string ":" ws value ("," ws string ":" ws value)*)? "}" ws
array ::= "[" ws (value ("," ws value)*)? "]" ws
string ::= "\"" ([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))* "\"" ws
number ::= "-"? [0-9]+ ("." [0-9]+)? ws
ws ::= [ \t\n]{0,8}
`;

const SNIPPETS = [
  'x ::= x "a"', // left recursion
  "y ::= z\nz ::= y", // a cycle of references
  'r ::= undefined-rule "a"',
  'r ::= "a"{0,1000000}',
  'r ::= ("a"{0,1000}){0,1000}',
  'r ::= "a"{5,2}',
  'r ::= ("")*',
  "r ::= [\\x",
  'r ::= "unterminated',
  "r ::= [z-a]",
  "r ::= [^]",
  "::=",
  "root ::= ",
  'r ::= "\\u{110000}"',
  'r ::= "\\xZZ"',
  "r ::= ()",
  'r ::= "a" | | "b"',
  "\u0000",
  "\ud800",
];

const nested = (depth) => `deep ::= ${"(".repeat(depth)}"a"${")".repeat(depth)}\n`;
const chain = (length) => Array.from({ length }, (_, i) => `c${i} ::= c${i + 1} "a"`).join("\n") + `\nc${length} ::= "b"\n`;
const alternatives = (count) => `alt ::= ${Array.from({ length: count }, (_, i) => `"a${i}"`).join(" | ")}\n`;

export function mutateGrammar(r, seed) {
  const at = r.int(seed.length + 1);
  const splice = (text) => seed.slice(0, at) + text + seed.slice(at);
  const choice = r.weighted([[5, "snippet"], [2, "grow"], [2, "bytes"], [1, "cut"], [1, "duplicate"]]);
  if (choice === "snippet") {
    const index = r.int(SNIPPETS.length);
    return { text: splice(`\n${SNIPPETS[index]}\n`), tags: [`grammar.snippet#${index}`] };
  }
  if (choice === "grow") {
    // Sizes from real (tens) to past the limits and past what llama.cpp's recursion survives.
    const size = r.pick([10, 200, 2000, 30000]);
    const kind = r.pick(["nest", "chain", "alternatives"]);
    const text = kind === "nest" ? nested(size) : kind === "chain" ? chain(size) : alternatives(size);
    return { text: `${seed}\n${text}`, tags: [`grammar.${kind} x${size}`] };
  }
  if (choice === "bytes") {
    const { bytes, tags } = mutateBytes(r, Buffer.from(seed, "utf8"));
    return { text: bytes.toString("utf8"), tags: tags.map((tag) => `grammar.${tag}`) };
  }
  const end = at + r.int(seed.length - at + 1);
  if (choice === "cut") return { text: seed.slice(0, at) + seed.slice(end), tags: ["grammar.cut"] };
  return { text: splice(seed.slice(at, end)), tags: ["grammar.duplicate"] };
}
