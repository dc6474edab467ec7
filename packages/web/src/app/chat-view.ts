import type { Message } from "@infer/core";

/** The conversation as shown: one list item per message; the answer being written grows in place. */
export class ChatView {
  constructor(private readonly list: HTMLOListElement) {}

  add(role: Message["role"], text: string): HTMLElement {
    const item = document.createElement("li");
    item.className = `message ${role}`;
    const label = document.createElement("span");
    label.className = "role";
    label.textContent = role === "user" ? "You" : "Model";
    const body = document.createElement("span");
    body.className = "text";
    body.textContent = text;
    item.append(label, body);
    const follow = this.atBottom();
    this.list.append(item);
    if (follow) this.scrollDown();
    return body;
  }

  /** Adds text to an answer; keeps following it only when the reader has not scrolled up. */
  append(body: HTMLElement, text: string): void {
    const follow = this.atBottom();
    body.append(text);
    if (follow) this.scrollDown();
  }

  markFailed(body: HTMLElement): void {
    body.parentElement?.classList.add("failed");
  }

  clear(): void {
    this.list.replaceChildren();
  }

  private atBottom(): boolean {
    return this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 40;
  }

  private scrollDown(): void {
    this.list.scrollTop = this.list.scrollHeight;
  }
}
