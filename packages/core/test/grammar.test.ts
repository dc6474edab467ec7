import assert from "node:assert/strict";
import { test } from "node:test";
import { GRAMMAR_LIMITS, grammarProblem, validateGenerateOptions } from "../src/index.js";

// A GBNF JSON grammar in the shape of llama.cpp's grammars/json.gbnf, written here.
const JSON_GRAMMAR = String.raw`root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
# up to one newline, then indentation
ws ::= | " " | "\n" [ \t]{0,20}`;

test("real grammars are within the limits", () => {
  assert.equal(grammarProblem(JSON_GRAMMAR), undefined);
  assert.equal(grammarProblem('root ::= "a"'), undefined);
});

test("nesting counts groups, not parentheses in strings, character classes or comments", () => {
  const at = (depth: number) => `root ::= ${"(".repeat(depth)}"a"${")".repeat(depth)}`;
  assert.equal(grammarProblem(at(GRAMMAR_LIMITS.maxNesting)), undefined);
  assert.match(grammarProblem(at(GRAMMAR_LIMITS.maxNesting + 1))!, /maxNesting/);
  const quoted = `root ::= "${"(".repeat(1000)}" [(\\]${"(".repeat(1000)}] # ${"(".repeat(1000)}\nx ::= "\\"("`;
  assert.equal(grammarProblem(quoted), undefined);
});

test("rule count and length are bounded", () => {
  const rules = (n: number) => Array.from({ length: n }, (_, i) => `r${i} ::= "a"`).join("\n");
  assert.equal(grammarProblem(rules(GRAMMAR_LIMITS.maxRules)), undefined);
  assert.match(grammarProblem(rules(GRAMMAR_LIMITS.maxRules + 1))!, /maxRules/);
  // "::=" inside a string is not a rule.
  assert.equal(grammarProblem(`root ::= "${"::=".repeat(GRAMMAR_LIMITS.maxRules + 1)}"`), undefined);
  assert.match(grammarProblem(`root ::= "${"a".repeat(GRAMMAR_LIMITS.maxChars)}"`)!, /maxChars/);
});

test("a repetition whose minimum is above its maximum is refused", () => {
  // llama.cpp computed its optional repeats as max - min, unsigned, and allocated until the machine ran out.
  assert.match(grammarProblem('root ::= "a"{5,2}')!, /\{5,2\}.*minimum is above its maximum/);
  assert.match(grammarProblem('root ::= x\nx ::= [a-z]{ 3 , 1 }')!, /minimum is above its maximum/);
  for (const ok of ['root ::= "a"{2,5}', 'root ::= "a"{3}', 'root ::= "a"{3,}', 'root ::= "{5,2}"', "root ::= [{5,2}]"]) {
    assert.equal(grammarProblem(ok), undefined, ok);
  }
});

test("the generate option is INVALID_OPTION naming the limit", () => {
  assert.throws(
    () => validateGenerateOptions({ grammar: `root ::= ${"(".repeat(300)}"a"${")".repeat(300)}` }),
    (error: Error & { code?: string }) => error.code === "INVALID_OPTION" && /grammar/.test(error.message) && /maxNesting/.test(error.message),
  );
  assert.doesNotThrow(() => validateGenerateOptions({ grammar: JSON_GRAMMAR }));
});
