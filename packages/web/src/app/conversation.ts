import type { Message } from "@infer/core";

/**
 * The text a model without a chat template continues: the conversation's turns joined by
 * newlines, so the first turn's prompt is exactly what the user typed.
 */
export function completionPrompt(messages: Message[]): string {
  return messages.map((m) => m.content).join("\n");
}
