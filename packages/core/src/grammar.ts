// Bounds on a GBNF grammar (GenerateOptions.grammar, and the grammar a backend derives from jsonSchema),
// checked before any grammar engine sees it. llama.cpp's GBNF parser recurses once per nested group and
// its grammar setup once per rule reference at the start of a rule, on the native stack, with no bound:
// a grammar of some 30 000 nested parentheses or chained rules ended the process (SIGSEGV), and 10 000
// chained rules or 100 000 alternatives took from 17 s to a minute first (the time grows with the square
// of the chain). Real grammars are a few KiB (llama.cpp's json.gbnf is one), nest a handful of levels, and
// define tens to hundreds of rules.

export interface GrammarLimits {
  /** The longest grammar text, in UTF-16 code units. */
  maxChars: number;
  /** The deepest nesting of parenthesized groups. */
  maxNesting: number;
  /** The most rule definitions (`name ::= ...`). */
  maxRules: number;
}

export const GRAMMAR_LIMITS: Readonly<GrammarLimits> = Object.freeze({
  maxChars: 64 * 1024,
  maxNesting: 256,
  maxRules: 2_000,
});

/**
 * What is wrong with `grammar` against `limits` (a phrase for an option error), or undefined. Parentheses
 * inside string literals, character classes and comments do not count.
 */
export function grammarProblem(grammar: string, limits: GrammarLimits = GRAMMAR_LIMITS): string | undefined {
  if (grammar.length > limits.maxChars) {
    return `is ${grammar.length} characters long, more than GRAMMAR_LIMITS.maxChars (${limits.maxChars})`;
  }
  const { nesting, rules, backwards } = measure(grammar, limits);
  if (nesting > limits.maxNesting) return `nests groups deeper than GRAMMAR_LIMITS.maxNesting (${limits.maxNesting})`;
  if (rules > limits.maxRules) return `defines more rules than GRAMMAR_LIMITS.maxRules (${limits.maxRules})`;
  // llama.cpp counts the optional repeats as max - min, unsigned: {5,2} allocated until the machine ran out.
  if (backwards !== undefined) return `repeats ${backwards}, whose minimum is above its maximum`;
  return undefined;
}

/**
 * The deepest group nesting and the rule count of a GBNF text (counting stopped once past a limit), and the
 * first repetition `{m,n}` with m > n.
 */
function measure(grammar: string, limits: GrammarLimits): { nesting: number; rules: number; backwards?: string } {
  let depth = 0;
  let nesting = 0;
  let rules = 0;
  let backwards: string | undefined;
  for (let i = 0; i < grammar.length && nesting <= limits.maxNesting && rules <= limits.maxRules; i++) {
    const char = grammar[i];
    if (char === '"' || char === "[") {
      const close = char === '"' ? '"' : "]";
      for (i++; i < grammar.length && grammar[i] !== close; i++) if (grammar[i] === "\\") i++;
    } else if (char === "#") {
      while (i < grammar.length && grammar[i] !== "\n") i++;
    } else if (char === "(") {
      depth++;
      nesting = Math.max(nesting, depth);
    } else if (char === ")") {
      depth = Math.max(0, depth - 1);
    } else if (char === ":" && grammar.startsWith("::=", i)) {
      rules++;
      i += 2;
    } else if (char === "{" && backwards === undefined) {
      const repeat = /^\{\s*(\d+)\s*,\s*(\d+)\s*\}/.exec(grammar.slice(i, i + 64));
      if (repeat && Number(repeat[2]) < Number(repeat[1])) backwards = repeat[0];
    }
  }
  return { nesting, rules, ...(backwards !== undefined && { backwards }) };
}
