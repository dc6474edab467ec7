import type { LanguageModelV3Prompt, SharedV3Warning } from "@ai-sdk/provider";
import type { Message } from "@infer/core";

/**
 * The AI SDK's prompt as infer chat messages. Text parts are kept; files are
 * dropped with a warning (the contract is text only); tool calls and results
 * become text so the conversation stays readable to the model.
 */
export function toMessages(prompt: LanguageModelV3Prompt, warnings: SharedV3Warning[]): Message[] {
  const messages: Message[] = [];
  let droppedFiles = false;
  for (const message of prompt) {
    switch (message.role) {
      case "system":
        messages.push({ role: "system", content: message.content });
        break;
      case "user": {
        const text = message.content.map((part) => (part.type === "text" ? part.text : ((droppedFiles = true), ""))).join("");
        messages.push({ role: "user", content: text });
        break;
      }
      case "assistant": {
        const text = message.content
          .map((part) => {
            if (part.type === "text") return part.text;
            if (part.type === "tool-call") return JSON.stringify({ tool: part.toolName, input: part.input });
            if (part.type === "file") droppedFiles = true;
            return "";
          })
          .join("");
        messages.push({ role: "assistant", content: text });
        break;
      }
      case "tool":
        for (const part of message.content) {
          if (part.type !== "tool-result") continue;
          const out = part.output;
          const value = out.type === "text" || out.type === "error-text" ? out.value : "value" in out ? JSON.stringify(out.value) : out.type;
          messages.push({ role: "tool", content: value });
        }
        break;
    }
  }
  if (droppedFiles) warnings.push({ type: "unsupported", feature: "file parts", details: "infer models read text only; file parts were dropped" });
  return messages;
}

/** A chat flattened to plain text, for models without a chat template. */
export function toPlainPrompt(messages: Message[]): string {
  return messages.map((m) => m.content).join("\n");
}
