/**
 * Chat templates: the model's Jinja template rendered with @huggingface/jinja,
 * the same engine transformers.js uses, with the variables Hugging Face's
 * apply_chat_template passes (messages, add_generation_prompt, bos_token,
 * eos_token, plus any extras such as tools), under core's render budget.
 */
import * as jinja from "@huggingface/jinja";
import { InferenceError, parseBoundedTemplate, renderBoundedTemplate, type ChatTemplateOrigin, type Message } from "@infer/core";

type Program = ReturnType<typeof jinja.parse>;

export interface RenderChatOptions {
  addGenerationPrompt?: boolean;
  bosToken?: string;
  eosToken?: string;
  /** Where the template came from, for error messages. */
  source?: string;
  /** The template was given as an option (over budget: INVALID_OPTION), not read from the model (MODEL_FORMAT). */
  fromOption?: boolean;
  [extra: string]: unknown;
}

const compiled = new Map<string, Program>();

function compile(template: string, origin: ChatTemplateOrigin): Program {
  let parsed = compiled.get(template);
  if (!parsed) {
    try {
      parsed = parseBoundedTemplate(jinja, template, origin);
    } catch (error) {
      if (error instanceof InferenceError) throw error;
      throw new InferenceError("MODEL_FORMAT", `${origin.source}: the chat template does not parse: ${(error as Error).message}`, {
        cause: error,
        details: { source: origin.source, field: "chat_template" },
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
  const { addGenerationPrompt = true, bosToken, eosToken, source = "the model", fromOption = false, ...extra } = options;
  if (template === undefined || template.trim() === "") {
    throw new InferenceError("NO_CHAT_TEMPLATE", `${source} has no chat template; pass one with the chatTemplate option`, {
      details: { source },
    });
  }
  const origin: ChatTemplateOrigin = { source, code: fromOption ? "INVALID_OPTION" : "MODEL_FORMAT" };
  const parsed = compile(template, origin);
  try {
    return renderBoundedTemplate(jinja, parsed, {
      ...extra,
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: addGenerationPrompt,
      bos_token: bosToken ?? "",
      eos_token: eosToken ?? "",
    }, origin);
  } catch (error) {
    if (error instanceof InferenceError) throw error;
    throw new InferenceError("MODEL_FORMAT", `${source}: the chat template failed to render: ${(error as Error).message}`, {
      cause: error,
      details: { source, field: "chat_template" },
    });
  }
}
