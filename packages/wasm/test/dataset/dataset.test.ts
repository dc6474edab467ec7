/**
 * Training data from JSONL: ids and loss masks for each record shape (checked
 * by decoding what is learned), packing, and bad lines named by number.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { isInferenceError, type Message } from "@infer/core";
import { jsonlBatches, jsonlExamples, toBatches, type TrainingExample } from "../../src/dataset/index.js";
import { readJsonlDataset } from "../../src/dataset/file.js";
import { loadTokenizer, type Tokenizer } from "../../src/tokenizer/index.js";
import { SHARED_MODELS, skipWithoutSharedModels } from "../engine/helpers.js";

const skip = skipWithoutSharedModels();
const FILE = "train.jsonl";
/** Turns between story markers (the vocabulary's BOS / EOS): each prefix renders as the start of the next. */
const TEMPLATE =
  "{% for m in messages %}<|start_story|>{{ m.role }}: {{ m.content }}<|end_story|>{% endfor %}" +
  "{% if add_generation_prompt %}<|start_story|>assistant:{% endif %}";

function jsonl(...records: unknown[]): string {
  return records.map((r) => JSON.stringify(r)).join("\n");
}

/** The text of the tokens an example learns, and of those it does not. */
function split(tokenizer: Tokenizer, example: TrainingExample): { learned: string; context: string } {
  const pick = (flag: number) => tokenizer.decode(example.inputIds.filter((_, t) => example.lossMask[t] === flag));
  return { learned: pick(1), context: pick(0) };
}

function rejectsWith(line: number | undefined, ...mentions: string[]) {
  return (error: unknown) => {
    assert.ok(isInferenceError(error, "INVALID_OPTION"), String(error));
    const message = (error as Error).message;
    assert.ok(message.startsWith(line === undefined ? `${FILE}: ` : `${FILE}:${line}: `), message);
    for (const text of mentions) assert.ok(message.includes(text), `"${message}" should name ${text}`);
    assert.equal((error as { details: Record<string, unknown> }).details.line, line);
    return true;
  };
}

describe("JSONL training data on tinystories-656k's tokenizer", { skip }, () => {
  let tokenizer: Tokenizer;
  before(async () => {
    tokenizer = await loadTokenizer(join(SHARED_MODELS, "tinystories-656k"));
  });

  test('{"text"}: BOS, the text and EOS, every token learned', () => {
    const [example] = jsonlExamples(jsonl({ text: "The dog ran home." }), FILE, tokenizer);
    assert.deepEqual(example!.inputIds, [...tokenizer.encode("The dog ran home."), tokenizer.eosId!]);
    assert.deepEqual(example!.lossMask, example!.inputIds.map(() => 1));
    assert.equal(example!.inputIds[0], tokenizer.bosId);
  });

  test('{"prompt", "completion"}: only the completion (and EOS) is learned, the text tokenized as one', () => {
    const [clean] = jsonlExamples(jsonl({ prompt: "The dog's name was ", completion: "Zorblat." }), FILE, tokenizer);
    assert.deepEqual(clean!.inputIds.slice(0, -1), tokenizer.encode("The dog's name was Zorblat."));
    assert.equal(split(tokenizer, clean!).learned, "Zorblat.<|end_story|>");
    assert.equal(split(tokenizer, clean!).context, tokenizer.decode(tokenizer.encode("The dog's name was ")));
    // This vocabulary's "e▁was▁" holds the completion's leading space: a token with any completion text is learned.
    const [straddling] = jsonlExamples(jsonl({ prompt: "The dog's name was", completion: " Zorblat." }), FILE, tokenizer);
    assert.equal(split(tokenizer, straddling!).learned, "e was Zorblat.<|end_story|>");
  });

  test('{"messages"}: the chat template renders it; only the assistant turns are learned', () => {
    const messages: Message[] = [
      { role: "system", content: "Tell stories." },
      { role: "user", content: "Who is the dog?" },
      { role: "assistant", content: " Zorblat." },
      { role: "user", content: "And the cat?" },
      { role: "assistant", content: " Mimi." },
    ];
    const [example] = jsonlExamples(jsonl({ messages }), FILE, tokenizer, { chatTemplate: TEMPLATE });
    const whole = tokenizer.renderChat(messages, { chatTemplate: TEMPLATE, addGenerationPrompt: false });
    assert.deepEqual(example!.inputIds, tokenizer.encode(whole, { addSpecialTokens: false }), "the example is the rendered chat");
    const { learned, context } = split(tokenizer, example!);
    // This vocabulary's ": " token straddles "assistant:" and the reply; the rest is exact.
    assert.match(learned, /^: +Zorblat\.<\|end_story\|>: +Mimi\.<\|end_story\|>$/);
    for (const text of ["Tell stories", "Who is the dog", "And the cat", "user", "system"]) assert.ok(context.includes(text), `${text} in ${context}`);
    assert.ok(!/Zorblat|Mimi/.test(context), context);
  });

  test("a template that does not render turns as prefixes is refused with the line", () => {
    const lastOnly = "{{ messages[-1].content }}";
    const text = jsonl({ text: "a" }, { messages: [{ role: "user", content: "q" }, { role: "assistant", content: "a" }] });
    assert.throws(() => jsonlExamples(text, FILE, tokenizer, { chatTemplate: lastOnly }), rejectsWith(2, "chat template"));
  });

  test("maxLength cuts examples; an example with nothing left to learn is skipped and counted", () => {
    const text = jsonl({ text: "The dog ran home and slept." }, { prompt: "A very long prompt about a dog and a cat", completion: " end" });
    const examples = jsonlExamples(text, FILE, tokenizer, { maxLength: 5 });
    assert.deepEqual(examples.map((e) => e.inputIds.length), [5, 5]);
    const { batches, stats } = toBatches(examples, FILE, { batchSize: 4 });
    assert.equal(stats.skipped, 1);
    assert.equal(stats.examples, 1);
    assert.equal(batches.length, 1);
    assert.equal(stats.targets, 4, "position 0 predicts nothing");
  });

  test("packing fills batches up to the token budget, in file order, every example once", () => {
    const records = Array.from({ length: 9 }, (_, i) => ({ text: "Once upon a time " + "x".repeat(i) }));
    const { batches, stats } = jsonlBatches(jsonl(...records), FILE, tokenizer, { batchTokens: 30 });
    const lengths = batches.map((b) => b.inputIds.reduce((sum, ids) => sum + ids.length, 0));
    assert.ok(lengths.every((n) => n <= 30), lengths.join(","));
    assert.ok(batches.length < records.length, "short examples share batches");
    assert.deepEqual(batches.flatMap((b) => b.inputIds), jsonlExamples(jsonl(...records), FILE, tokenizer).map((e) => e.inputIds));
    assert.equal(stats.examples, 9);
    assert.equal(stats.tokens, lengths.reduce((a, b) => a + b, 0));
    const fixed = jsonlBatches(jsonl(...records), FILE, tokenizer, { batchSize: 4 });
    assert.deepEqual(fixed.batches.map((b) => b.inputIds.length), [4, 4, 1]);
  });

  test("bad lines: the file and line number in an INVALID_OPTION; blank lines do not shift the count", async () => {
    const cases: [string, number | undefined, string[]][] = [
      ['{"text": "ok"}\n\n{"text": ', 3, ["not valid JSON"]],
      ['{"text": "ok"}\n[1, 2]', 2, ["JSON object"]],
      ['{"text": 5}', 1, ['"text"']],
      ['{"prompt": "p"}', 1, ['"completion"']],
      ['{"prompt": "p", "completion": ""}', 1, ["empty"]],
      ['{"label": 1}', 1, ['"text"', '"messages"']],
      ['{"messages": [{"role": "user", "content": "hi"}]}', 1, ["no assistant turn"]],
      ['{"messages": [{"role": "wizard", "content": "hi"}]}', 1, ["messages[0].role", "wizard"]],
      ['{"messages": [{"role": "assistant"}]}', 1, ["messages[0].content"]],
      ["\n  \n", undefined, ["no examples"]],
    ];
    for (const [text, line, mentions] of cases) {
      assert.throws(() => jsonlBatches(text, FILE, tokenizer, { chatTemplate: TEMPLATE }), rejectsWith(line, ...mentions), text);
    }
    assert.throws(() => jsonlBatches(jsonl({ text: "a" }), FILE, tokenizer, { batchTokens: 0 }), rejectsWith(undefined, "batchTokens"));
    const dir = await mkdtemp(join(tmpdir(), "infer-dataset-"));
    try {
      await writeFile(join(dir, "data.jsonl"), jsonl({ text: "The end." }));
      const { stats } = await readJsonlDataset(join(dir, "data.jsonl"), tokenizer);
      assert.equal(stats.examples, 1);
      await assert.rejects(readJsonlDataset(join(dir, "missing.jsonl"), tokenizer), (error: unknown) => isInferenceError(error, "MODEL_NOT_FOUND"));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
