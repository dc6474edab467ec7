/**
 * Chat templates: the model's Jinja template rendered with @huggingface/jinja,
 * the same engine transformers.js uses, with the variables Hugging Face's
 * apply_chat_template passes (messages, add_generation_prompt, bos_token,
 * eos_token, plus any extras such as tools).
 */
import { Template } from "@huggingface/jinja";
import { InferenceError, type Message } from "@infer/core";

export interface RenderChatOptions {
  addGenerationPrompt?: boolean;
  bosToken?: string;
  eosToken?: string;
  /** Where the template came from, for error messages. */
  source?: string;
  [extra: string]: unknown;
}

const compiled = new Map<string, Template>();

function compile(template: string, source: string): Template {
  let parsed = compiled.get(template);
  if (!parsed) {
    try {
      parsed = new Template(template);
    } catch (error) {
      throw new InferenceError("MODEL_FORMAT", `${source}: the chat template does not parse: ${(error as Error).message}`, {
        cause: error,
        details: { source, field: "chat_template" },
      });
    }
    if (compiled.size > 32) compiled.clear();
    compiled.set(template, parsed);
  }
  return parsed;
}

export function renderChat(
  template: string | undefined,
  messages: readonly Message[],
  options: RenderChatOptions = {},
): string {
  const { addGenerationPrompt = true, bosToken, eosToken, source = "the model", ...extra } = options;
  if (template === undefined || template.trim() === "") {
    throw new InferenceError("NO_CHAT_TEMPLATE", `${source} has no chat template; pass one with the chatTemplate option`, {
      details: { source },
    });
  }
  const parsed = compile(template, source);
  try {
    return parsed.render({
      ...extra,
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: addGenerationPrompt,
      bos_token: bosToken ?? "",
      eos_token: eosToken ?? "",
    });
  } catch (error) {
    throw new InferenceError("MODEL_FORMAT", `${source}: the chat template failed to render: ${(error as Error).message}`, {
      cause: error,
      details: { source, field: "chat_template" },
    });
  }
}
