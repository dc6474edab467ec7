import assert from "node:assert/strict";
import { isInferenceError } from "../errors.js";
import { isTokenizerModel, type TextModel } from "../model.js";
import type { Message } from "../types.js";

const nest = (open: string, middle: string, close: string, depth: number) => open.repeat(depth) + middle + close.repeat(depth);

/**
 * Chat templates that would run without end or take gigabytes on an
 * unbounded renderer (issue #21's fuzzer reproducers and their kin), each
 * with the limit of `CHAT_TEMPLATE_LIMITS` it breaks.
 */
export const RUNAWAY_CHAT_TEMPLATES: ReadonlyArray<{ name: string; template: string; limit: string }> = [
  { name: "range(1000000000)", template: "{% for i in range(1000000000) %}x{% endfor %}", limit: "maxSteps" },
  {
    name: "10^5 x 10^5 nested ranges",
    template: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    limit: "maxSteps",
  },
  {
    name: "7 loops over a 10-item list",
    template: "{% set x = [0,1,2,3,4,5,6,7,8,9] %}" + nest("{% for i in x %}", "", "{% endfor %}", 7),
    limit: "maxSteps",
  },
  {
    name: "macros doubling 20 times",
    template:
      "{% macro m0() %}x{% endmacro %}" +
      Array.from({ length: 20 }, (_, i) => `{% macro m${i + 1}() %}{{ m${i}() }}{{ m${i}() }}{% endmacro %}`).join("") +
      "{{ m20() }}",
    limit: "maxSteps",
  },
  { name: "a macro calling itself", template: "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", limit: "maxDepth" },
  {
    name: "a macro calling itself through a call block",
    template: "{% macro f(n) %}{% call f(n) %}x{% endcall %}{% endmacro %}{{ f(1) }}",
    limit: "maxDepth",
  },
  { name: "a macro calling itself in its arguments", template: "{% macro f(n) %}{{ f(f(n)) }}{% endmacro %}{{ f(1) }}", limit: "maxDepth" },
  { name: "1 000 nested ifs", template: nest("{% if true %}", "x", "{% endif %}", 1_000), limit: "maxNesting" },
  { name: "10 000 nested parentheses", template: nest("{{ ", nest("(", "1", ")", 10_000), " }}", 1), limit: "maxNesting" },
  // Too long to tokenize (the library takes about a second for this one), whatever it holds.
  { name: "100 000 nested ifs", template: nest("{% if true %}", "x", "{% endif %}", 100_000), limit: "maxTemplateChars" },
  {
    name: "a string doubled 64 times",
    template: "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
    limit: "maxChars",
  },
  { name: "indent by 300 000 000", template: "{{ 'a\nb' | indent(300000000) }}", limit: "maxChars" },
];

const MESSAGES: Message[] = [{ role: "user", content: "Once upon a time" }];

/**
 * Checks that each runaway template, given as `chatTemplate`, fails with
 * INVALID_OPTION naming the option and the limit (through `chatText` and
 * `applyChatTemplate`), and that `model` then still chats with `goodTemplate`.
 */
export async function assertRunawayTemplatesFail(model: TextModel, goodTemplate: string): Promise<void> {
  const expected = (limit: string) => (error: unknown) => {
    assert.ok(isInferenceError(error, "INVALID_OPTION"), `expected INVALID_OPTION, got ${String(error)}`);
    assert.match(error.message, /chatTemplate/);
    // The time limit is the net under the others: on a machine slow enough it is reached first.
    assert.match(error.message, new RegExp(`limit (${limit}|maxMillis)`));
    return true;
  };
  for (const { name, template, limit } of RUNAWAY_CHAT_TEMPLATES) {
    const started = performance.now();
    await assert.rejects(model.chatText(MESSAGES, { chatTemplate: template, maxTokens: 2 }), expected(limit), name);
    if (isTokenizerModel(model)) {
      assert.throws(() => model.applyChatTemplate(MESSAGES, { chatTemplate: template }), expected(limit), name);
    }
    // The budget's clock stops any render at 2 s; these stop on their own limit, well before.
    assert.ok(performance.now() - started < 10_000, `${name} took ${Math.round(performance.now() - started)} ms`);
  }
  const after = await model.chatText(MESSAGES, { chatTemplate: goodTemplate, temperature: 0, maxTokens: 3, ignoreEos: true });
  assert.equal(after.tokens.length, 3);
}
