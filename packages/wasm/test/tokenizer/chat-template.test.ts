/**
 * Chat templates shipped in the reference tokenizer configs, rendered through
 * our tokenizer and checked against the literal prompt formats the model
 * families document.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Message } from "@infer/core";
import { loadHfTokenizer, renderChat } from "../../src/tokenizer/index.js";
import { referenceFiles } from "./helpers.js";

const conversation: Message[] = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "hi" },
  { role: "assistant", content: "hello" },
  { role: "user", content: "2+2?" },
];

describe("chat templates", () => {
  it("Qwen3 (ChatML): <|im_start|>role\\ncontent<|im_end|>", async () => {
    const tokenizer = await loadHfTokenizer(referenceFiles("qwen3").folder);
    assert.equal(
      tokenizer.renderChat([{ role: "user", content: "hi" }]),
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    );
    assert.equal(
      tokenizer.renderChat(conversation, { addGenerationPrompt: false }),
      "<|im_start|>system\nYou are terse.<|im_end|>\n" +
        "<|im_start|>user\nhi<|im_end|>\n" +
        "<|im_start|>assistant\nhello<|im_end|>\n" +
        "<|im_start|>user\n2+2?<|im_end|>\n",
    );
    // Extra variables reach the template: Qwen3 writes an empty think block when thinking is off.
    assert.equal(
      tokenizer.renderChat([{ role: "user", content: "hi" }], { extra: { enable_thinking: false } }),
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    );
    // The rendered prompt tokenizes with the control tokens whole.
    const ids = tokenizer.encode(tokenizer.renderChat([{ role: "user", content: "hi" }]));
    assert.equal(ids[0], tokenizer.tokenId("<|im_start|>"));
    assert.equal(ids.filter((id) => id === tokenizer.tokenId("<|im_end|>")).length, 1);
  });

  it("Llama 3: header ids, blank line, <|eot_id|>, with bos_token first", async () => {
    const tokenizer = await loadHfTokenizer(referenceFiles("llama3").folder);
    assert.equal(
      tokenizer.renderChat([{ role: "user", content: "  hi  " }]),
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>" +
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    );
  });

  it("Gemma 3: turns, the system prompt folded into the first user turn", async () => {
    const tokenizer = await loadHfTokenizer(referenceFiles("gemma3").folder);
    assert.equal(
      tokenizer.renderChat(conversation),
      "<bos><start_of_turn>user\nYou are terse.\n\nhi<end_of_turn>\n" +
        "<start_of_turn>model\nhello<end_of_turn>\n" +
        "<start_of_turn>user\n2+2?<end_of_turn>\n" +
        "<start_of_turn>model\n",
    );
    // The template's own raise_exception surfaces as MODEL_FORMAT naming the template's file.
    assert.throws(
      () => tokenizer.renderChat([{ role: "assistant", content: "a" }, { role: "assistant", content: "b" }]),
      (error: Error & { code?: string }) =>
        error.code === "MODEL_FORMAT" && /tokenizer_config\.json chat_template/.test(error.message) && /alternate/.test(error.message),
    );
  });

  it("renderChat passes bos/eos tokens and the generation-prompt flag", () => {
    const template = "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}>{% endif %}{{ eos_token }}";
    const messages: Message[] = [{ role: "user", content: "x" }];
    assert.equal(renderChat(template, messages, { bosToken: "<s>", eosToken: "</s>" }), "<s>[user:x]></s>");
    assert.equal(renderChat(template, messages, { addGenerationPrompt: false }), "[user:x]");
  });

  it("no template is NO_CHAT_TEMPLATE; a broken one is MODEL_FORMAT naming its source", async () => {
    const llama2 = await loadHfTokenizer(referenceFiles("llama2").folder);
    assert.equal(llama2.chatTemplate, undefined);
    assert.throws(() => llama2.renderChat([{ role: "user", content: "hi" }]), { code: "NO_CHAT_TEMPLATE" });
    assert.throws(() => renderChat(undefined, []), { code: "NO_CHAT_TEMPLATE" });
    assert.throws(() => renderChat("  ", []), { code: "NO_CHAT_TEMPLATE" });
    assert.throws(
      () => renderChat("{% if %}", [], { source: "my-template.jinja" }),
      (error: Error & { code?: string }) => error.code === "MODEL_FORMAT" && error.message.startsWith("my-template.jinja:"),
    );
    // A template given as an option overrides the model's and is named as such.
    assert.throws(
      () => llama2.renderChat([{ role: "user", content: "hi" }], { chatTemplate: "{{ raise_exception('nope') }}" }),
      (error: Error & { code?: string }) => error.code === "MODEL_FORMAT" && error.message.startsWith("the chatTemplate option"),
    );
    assert.equal(llama2.renderChat([{ role: "user", content: "hi" }], { chatTemplate: "{{ messages[0].content }}" }), "hi");
  });
});
