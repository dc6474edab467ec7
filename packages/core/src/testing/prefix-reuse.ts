import assert from "node:assert/strict";
import type { GenerateMetrics, GenerationResult, Message } from "../types.js";
import { isKVSnapshotModel, isTokenizerModel, type TextModel } from "../model.js";

/**
 * A template any model can render (stories-sized test models ship none). It
 * ends with "assistant:", so a reply continues the prompt and the next turn's
 * prompt repeats both: what prefix reuse finds cached.
 */
export const PLAIN_CHAT_TEMPLATE =
  "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

const GREEDY = { temperature: 0, maxTokens: 16, chatTemplate: PLAIN_CHAT_TEMPLATE } as const;
const TURNS = ["Tom had a red ball.", "Where did the ball go?", "What did Tom do next?"];

/** The messages of a chat after `replies.length` answered turns, ending with the next user turn. */
function chatAfter(replies: string[]): Message[] {
  return replies.flatMap((reply, i): Message[] => [
    { role: "user", content: TURNS[i]! },
    { role: "assistant", content: reply },
  ]).concat({ role: "user", content: TURNS[replies.length]! });
}

/**
 * Three chat turns, greedy, on a model that reuses cached prefixes and on one
 * that does not: the replies are identical, and from the second turn on the
 * reusing model evaluates only the prompt tokens past what the previous turn
 * left in its cache (its prompt and reply), which the metrics show.
 */
export async function assertChatPrefixReuse(reusing: TextModel, plain: TextModel): Promise<void> {
  assert.ok(isTokenizerModel(reusing), "the model exposes its tokenizer");
  const replies: string[] = [];
  let previousIds: number[] = [];
  for (let turn = 0; turn < TURNS.length; turn++) {
    const messages = chatAfter(replies);
    const expected = await plain.chatText(messages, GREEDY);
    assert.equal(plain.metrics().cachedPromptTokens, 0, "the model without reuse reports cached tokens");
    const result: GenerationResult = await reusing.chatText(messages, GREEDY);
    assert.deepEqual(result.tokens.map((t) => t.id), expected.tokens.map((t) => t.id), `turn ${turn + 1}: tokens differ with reuse`);
    const metrics: GenerateMetrics = reusing.metrics();
    assert.equal(metrics.promptTokens, expected.metrics.promptTokens, "both models count the same prompt");
    const promptIds: number[] = reusing.encode(reusing.applyChatTemplate(messages, { chatTemplate: PLAIN_CHAT_TEMPLATE }));
    assert.equal(promptIds.length, metrics.promptTokens, "the prompt as the test encodes it is the one the model ran");
    // What the last call left in the cache: its prompt and the reply, but for the token sampled last, which is never
    // evaluated (an end token, or the reply's last at maxTokens).
    let shared = 0;
    while (shared < promptIds.length - 1 && shared < previousIds.length && promptIds[shared] === previousIds[shared]) shared++;
    assert.equal(metrics.cachedPromptTokens, shared, `turn ${turn + 1}: reused tokens`);
    if (turn > 0) assert.ok(shared > 0, "the later turns share a prefix with the earlier ones: the check would prove nothing");
    const reply = result.tokens.map((t) => t.id);
    previousIds = promptIds.concat(result.finishReason === "length" ? reply.slice(0, -1) : reply);
    replies.push(result.text);
  }
}

/**
 * A conversation snapshotted after its first turn, then overwritten by other
 * calls (or taken to `fresh`, another load of the same model), continues after
 * `restoreKV` with the same greedy tokens as without the interruption, and
 * evaluates only its new tokens.
 */
export async function assertKVSnapshotResumes(model: TextModel, fresh: TextModel): Promise<void> {
  assert.ok(isKVSnapshotModel(model) && isKVSnapshotModel(fresh), "the models implement KVSnapshotModel");
  const first = await model.chatText(chatAfter([]), GREEDY);
  const snapshot = await model.snapshotKV();
  const next = chatAfter([first.text]);
  const uninterrupted = await model.chatText(next, GREEDY);
  // Other conversations fill every slot the model has.
  for (let i = 0; i < 4; i++) await model.generateText(`Once upon a time ${i}`, { ...GREEDY, maxTokens: 4 });
  for (const target of [model, fresh]) {
    await target.restoreKV(snapshot);
    const resumed = await target.chatText(next, GREEDY);
    assert.deepEqual(resumed.tokens.map((t) => t.id), uninterrupted.tokens.map((t) => t.id), "the resumed chat continues differently");
    const { promptTokens, cachedPromptTokens } = target.metrics();
    assert.ok(cachedPromptTokens >= first.metrics.promptTokens, `resumed with ${cachedPromptTokens} of ${promptTokens} prompt tokens reused`);
  }
}
