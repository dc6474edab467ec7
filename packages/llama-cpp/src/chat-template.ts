import { Template } from "@huggingface/jinja";
import { InferenceError, type Message } from "@infer/core";

export interface ChatTemplateContext {
  /** The model's own template (GGUF `tokenizer.chat_template`), if it has one. */
  modelTemplate?: string;
  bosToken: string;
  eosToken: string;
}

const compiled = new Map<string, Template>();

function compile(source: string, origin: string): Template {
  let template = compiled.get(source);
  if (!template) {
    try {
      template = new Template(source);
    } catch (error) {
      throw new InferenceError("INVALID_OPTION", `${origin} is not a valid Jinja template: ${(error as Error).message}`, {
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
 * token strings in scope.
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
  const template = compile(source, options.chatTemplate !== undefined ? "options.chatTemplate" : "the model's chat template");
  try {
    return template.render({
      messages: messages.map((m) => ({ role: m.role, content: m.content })),
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: context.bosToken,
      eos_token: context.eosToken,
    });
  } catch (error) {
    throw new InferenceError("INVALID_OPTION", `the chat template failed to render: ${(error as Error).message}`, {
      cause: error,
    });
  }
}
