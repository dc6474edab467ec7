/**
 * The render budget core puts on chat templates (parseBoundedTemplate,
 * renderBoundedTemplate), driven with the @huggingface/jinja this package
 * renders with: real templates render exactly as the library's own
 * Template does, runaway ones fail fast with a code naming their source.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as jinja from "@huggingface/jinja";
import {
  CHAT_TEMPLATE_LIMITS,
  isInferenceError,
  parseBoundedTemplate,
  renderBoundedTemplate,
  type ChatTemplateLimits,
  type Message,
} from "@infer/core";
import { RUNAWAY_CHAT_TEMPLATES } from "@infer/core/testing";
import { renderChat } from "../../src/tokenizer/index.js";
import { referenceFiles, type ReferenceName } from "./helpers.js";

const origin = { source: "test.jinja", code: "MODEL_FORMAT" } as const;

function conversation(turns: number): Message[] {
  return Array.from({ length: turns }, (_, i) => ({
    role: i === 0 ? "system" : i % 2 === 1 ? "user" : "assistant",
    content: `turn ${i}: ${"words ".repeat(i % 7)}`,
  }));
}

function bounded(template: string, variables: Record<string, unknown>, limits?: Partial<ChatTemplateLimits>): string {
  const all = { ...CHAT_TEMPLATE_LIMITS, ...limits };
  return renderBoundedTemplate(jinja, parseBoundedTemplate(jinja, template, origin, all), variables, origin, all);
}

const overLimit = (code: string, limit: string, source: string = origin.source) => (error: unknown) =>
  isInferenceError(error, code as "MODEL_FORMAT") &&
  error.message.startsWith(`${source}: the chat template `) &&
  error.message.endsWith(`(limit ${limit})`) &&
  error.details?.limit === limit;

describe("chat template budget", () => {
  for (const name of ["qwen3", "llama3", "gemma3"] as ReferenceName[]) {
    it(`${name}'s template renders as the library's own Template does, for 4 and 400 turns`, () => {
      const template = referenceFiles(name).tokenizerConfig.chat_template as string;
      for (const turns of [4, 400]) {
        const variables = { messages: conversation(turns), add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>" };
        assert.equal(bounded(template, variables), new jinja.Template(template).render(variables));
      }
    });
  }

  it("each runaway template fails: MODEL_FORMAT from a model file, INVALID_OPTION as an option, naming the source and limit", () => {
    const messages: Message[] = [{ role: "user", content: "hi" }];
    // The time limit is the net under the others: on a machine slow enough it is reached first.
    const either = (code: string, limit: string, source: string) => (error: unknown) =>
      overLimit(code, limit, source)(error) || overLimit(code, "maxMillis", source)(error);
    for (const { name, template, limit } of RUNAWAY_CHAT_TEMPLATES) {
      assert.throws(() => renderChat(template, messages, { source: "model.gguf" }), either("MODEL_FORMAT", limit, "model.gguf"), name);
      const asOption = { source: "the option", fromOption: true };
      assert.throws(() => renderChat(template, messages, asOption), either("INVALID_OPTION", limit, "the option"), name);
    }
  });

  it("the clock stops steps that are each expensive; depth stops deep evaluation", () => {
    const loop = "{% for i in range(100000) %}{{ i }}{% endfor %}";
    assert.equal(bounded(loop, {}, { maxSteps: 1e9, maxMillis: 120_000 }).length, 488_890);
    assert.throws(() => bounded(loop, {}, { maxSteps: 1e9, maxMillis: 0 }), overLimit("MODEL_FORMAT", "maxMillis"));
    const deep = "{% if true %}".repeat(30) + "x" + "{% endif %}".repeat(30);
    assert.equal(bounded(deep, {}), "x");
    assert.throws(() => bounded(deep, {}, { maxDepth: 20 }), overLimit("MODEL_FORMAT", "maxDepth"));
    assert.throws(() => bounded(deep, {}, { maxNesting: 20 }), overLimit("MODEL_FORMAT", "maxNesting"));
  });

  it("the template's own length is checked before it is read: maxTemplateChars renders, one more character fails", () => {
    const longest = "{{ 'a' }}" + "x".repeat(CHAT_TEMPLATE_LIMITS.maxTemplateChars - 9);
    assert.equal(bounded(longest, {}), "a" + "x".repeat(CHAT_TEMPLATE_LIMITS.maxTemplateChars - 9));
    assert.throws(() => bounded(longest + "x", {}), overLimit("MODEL_FORMAT", "maxTemplateChars"));
    // Refused on its length before the library's tokenizer reads it: text it would reject gets the same error.
    const unterminated = "{{ 'unterminated ".repeat(10);
    assert.throws(() => bounded(unterminated, {}), /Unexpected end of input/);
    assert.throws(() => bounded(unterminated, {}, { maxTemplateChars: 100 }), overLimit("MODEL_FORMAT", "maxTemplateChars"));
  });

  it("indent and tojson padding is checked before it is built: width times lines against maxChars", () => {
    assert.equal(bounded("{{ 'a\nb' | indent(2) }}", {}), "a\n  b");
    assert.equal(bounded("{{ x | tojson(indent=2) }}", { x: [1] }), "[\n  1\n]");
    assert.equal(bounded("{{ text | indent(width=100) }}", { text: "a\n".repeat(99) }, { maxChars: 10_000 }).length, 98 * 101 + 1 + 99);
    for (const template of ["{{ 'a\nb' | indent(300000000) }}", "{{ text | indent(width=101) }}", "{{ x | tojson(indent=20000) }}"]) {
      assert.throws(() => bounded(template, { text: "a\n".repeat(99), x: [1] }, { maxChars: 10_000 }), overLimit("MODEL_FORMAT", "maxChars"), template);
    }
  });

  it("self-recursive macros stop at maxDepth every time, also when the caller has used much of the stack", () => {
    // The library hides a stack overflow in its variable lookup as "undefined" (a misleading "cannot
    // call" error that came and went with how warm the process was): the depth limit must come first.
    const recursive = RUNAWAY_CHAT_TEMPLATES.filter(({ limit }) => limit === "maxDepth");
    assert.ok(recursive.length >= 3);
    const deepCall = (frames: number, run: () => void): void => (frames === 0 ? run() : deepCall(frames - 1, run));
    for (const { name, template } of recursive) {
      for (const frames of [0, 0, 0, 4000]) {
        deepCall(frames, () => assert.throws(() => bounded(template, {}), overLimit("MODEL_FORMAT", "maxDepth"), `${name}, ${frames} frames`));
      }
    }
  });

  it("the budget grows with the inputs: long conversations and long messages still render", () => {
    const template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
    const long = conversation(2000);
    assert.equal(bounded(template, { messages: long }, { maxSteps: 100 }), new jinja.Template(template).render({ messages: long }));
    const document = "x".repeat(CHAT_TEMPLATE_LIMITS.maxChars + 1);
    assert.equal(bounded(template, { messages: [{ role: "user", content: document }] }).length, document.length + 7);
    // Without inputs that large, a value that size is over budget.
    assert.throws(() => bounded(`{{ 'a\nb' | indent(${CHAT_TEMPLATE_LIMITS.maxChars}) }}`, {}), overLimit("MODEL_FORMAT", "maxChars"));
  });
});
