// Findings already reported whose fixes have not landed. A campaign counts a matching case as `known`,
// not new; `--skip-known` does not even run it (a llama.cpp abort costs a child restart of seconds). Each predicate reads the mutant itself, so it also
// catches the same fault reached by another mutation. Remove an entry when its fix lands, so the fuzzer
// checks the fix.
export const KNOWN_FINDINGS = [
  {
    id: "chat-template-unbounded-loop",
    backends: ["wasm", "llama_cpp"],
    outcomes: ["hang", "memory"],
    issue: "#21 (found by this fuzzer)",
    about:
      "a chat template looping 10^7 times or more (range(1000000000) builds the whole list first), or nesting " +
      "100 000 deep, renders without a step or memory budget: it hangs or takes gigabytes (both backends render " +
      "with @huggingface/jinja)",
    matches(c) {
      const template = c.files["template.jinja"]?.toString("utf8");
      if (!template) return false;
      let steps = 1;
      for (const [, count] of template.matchAll(/range\(\s*(\d+)\s*\)/g)) steps *= Number(count);
      const nesting = Math.max(template.split("{% if").length, template.split("(").length) - 1;
      return steps >= 1e7 || nesting >= 50000;
    },
  },
];

/** The known finding a case matches on a backend, if any. */
export function knownFinding(fuzzCase, backend) {
  return KNOWN_FINDINGS.find((k) => k.backends.includes(backend) && k.matches(fuzzCase));
}
