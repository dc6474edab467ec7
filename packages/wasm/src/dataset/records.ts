/**
 * Training data as JSONL, one example a line, in one of three shapes:
 * {"text"} (learn every token), {"prompt", "completion"} (learn the
 * completion) or {"messages"} (a chat; learn the assistant turns). Bad lines
 * fail with INVALID_OPTION naming the file and line.
 */
import { InferenceError, type Message, type Role } from "@infer/core";

export type DataRecord =
  | { kind: "text"; line: number; text: string }
  | { kind: "completion"; line: number; prompt: string; completion: string }
  | { kind: "chat"; line: number; messages: Message[] };

const ROLES: ReadonlySet<string> = new Set<Role>(["system", "user", "assistant", "tool"]);

export function dataError(file: string, line: number | undefined, problem: string, field?: string): InferenceError {
  const where = line === undefined ? file : `${file}:${line}`;
  return new InferenceError("INVALID_OPTION", `${where}: ${problem}`, { details: { option: "data", file, line, field } });
}

/** The records of a JSONL text; blank lines are skipped, line numbers count from 1. */
export function parseJsonl(text: string, file: string): DataRecord[] {
  const records: DataRecord[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const source = lines[i]!.trim();
    if (source === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(source);
    } catch (error) {
      throw Object.assign(dataError(file, i + 1, `not valid JSON (${(error as Error).message})`), { cause: error });
    }
    records.push(readRecord(value, file, i + 1));
  }
  if (records.length === 0) throw dataError(file, undefined, "the dataset holds no examples");
  return records;
}

function readRecord(value: unknown, file: string, line: number): DataRecord {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw dataError(file, line, "a record must be a JSON object");
  const record = value as Record<string, unknown>;
  const string = (field: string): string => {
    if (typeof record[field] !== "string") throw dataError(file, line, `"${field}" must be a string`, field);
    return record[field] as string;
  };
  if ("messages" in record) return { kind: "chat", line, messages: readMessages(record.messages, file, line) };
  if ("prompt" in record || "completion" in record) {
    const prompt = string("prompt");
    const completion = string("completion");
    if (completion === "") throw dataError(file, line, '"completion" is empty: nothing to learn', "completion");
    return { kind: "completion", line, prompt, completion };
  }
  if ("text" in record) {
    const text = string("text");
    if (text === "") throw dataError(file, line, '"text" is empty', "text");
    return { kind: "text", line, text };
  }
  throw dataError(file, line, 'a record needs "text", "prompt" and "completion", or "messages"');
}

function readMessages(value: unknown, file: string, line: number): Message[] {
  if (!Array.isArray(value) || value.length === 0) throw dataError(file, line, '"messages" must be a non-empty array', "messages");
  const messages = value.map((item: unknown, i): Message => {
    const field = `messages[${i}]`;
    if (typeof item !== "object" || item === null) throw dataError(file, line, `${field} must be an object`, field);
    const { role, content } = item as Record<string, unknown>;
    if (typeof role !== "string" || !ROLES.has(role)) {
      throw dataError(file, line, `${field}.role must be one of ${[...ROLES].join(", ")} (got ${JSON.stringify(role)})`, `${field}.role`);
    }
    if (typeof content !== "string") throw dataError(file, line, `${field}.content must be a string`, `${field}.content`);
    return { role: role as Role, content };
  });
  if (!messages.some((m) => m.role === "assistant")) throw dataError(file, line, "the chat has no assistant turn: nothing to learn", "messages");
  return messages;
}
