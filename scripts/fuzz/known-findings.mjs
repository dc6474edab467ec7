// Findings already reported whose fixes have not landed. A campaign counts a matching case as `known`,
// not new; `--skip-known` does not even run it (a llama.cpp abort costs a child restart of seconds).
// Each entry is { id, backends, outcomes, issue, about, matches(fuzzCase) }: the predicate reads the
// mutant itself, so it also catches the same fault reached by another mutation. Remove an entry when
// its fix lands, so the fuzzer checks the fix. None is open now (docs/reliability.md, "Known findings").
export const KNOWN_FINDINGS = [];

/** The known finding a case matches on a backend, if any. */
export function knownFinding(fuzzCase, backend) {
  return KNOWN_FINDINGS.find((k) => k.backends.includes(backend) && k.matches(fuzzCase));
}
