import * as jinja from "@huggingface/jinja";
import { InferenceError, parseBoundedTemplate, renderBoundedTemplate, type ChatTemplateOrigin, type Message } from "@infer/core";

type Program = ReturnType<typeof jinja.parse>;

export interface ChatTemplateContext {
  /** The model's own template (GGUF `tokenizer.chat_template`), if it has one. */
  modelTemplate?: string;
  bosToken: string;
  eosToken: string;
}

const compiled = new Map<string, Program>();

function compile(source: string, origin: ChatTemplateOrigin): Program {
  let template = compiled.get(source);
  if (!template) {
    try {
      template = parseBoundedTemplate(jinja, source, origin);
    } catch (error) {
      if (error instanceof InferenceError) throw error;
      throw new InferenceError("INVALID_OPTION", `${origin.source} is not a valid Jinja template: ${(error as Error).message}`, {
        cause: error,
      });
    }
    if (compiled.size > 16) compiled.clear();
    compiled.set(source, template);
  }
  return template;
}

/**
 * Renders messages the way Hugging Face's `apply_chat_template` does: the
 * Jinja template with `messages`, `add_generation_prompt` and the special
 * token strings in scope, under core's render budget (over it: INVALID_OPTION
 * for options.chatTemplate, MODEL_FORMAT for the model's own template).
 */
export function renderChatTemplate(
  messages: Message[],
  context: ChatTemplateContext,
  options: { addGenerationPrompt?: boolean; chatTemplate?: string } = {},
): string {
  const source = options.chatTemplate ?? context.modelTemplate;
  if (source === undefined) {
    throw new InferenceError(
      "NO_CHAT_TEMPLATE",
      "this model has no chat template (GGUF key tokenizer.chat_template); pass options.chatTemplate",
    );
  }
  const origin: ChatTemplateOrigin =
    options.chatTemplate !== undefined
      ? { source: "options.chatTemplate", code: "INVALID_OPTION" }
      : { source: "the model's chat template (GGUF key tokenizer.chat_template)", code: "MODEL_FORMAT" };
  const template = compile(source, origin);
  try {
    return renderBoundedTemplate(jinja, template, {
      messages: messages.map((m) => ({ role: m.role, content: m.content })),
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: context.bosToken,
      eos_token: context.eosToken,
    }, origin);
  } catch (error) {
    if (error instanceof InferenceError) throw error;
    throw new InferenceError("INVALID_OPTION", `the chat template failed to render: ${(error as Error).message}`, {
      cause: error,
    });
  }
}
