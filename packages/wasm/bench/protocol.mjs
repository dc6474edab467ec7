// What one benchmark run measures, shared by the Node runs (measure.mjs) and the browser page
// (browser-page/run.js), so both give each engine the same context, prompts and token counts.
// Plain JavaScript with no imports: a page loads it as it is.

/** Every engine gets the same context: room for the longest prompt plus the decoded tokens. */
export const CONTEXT = 1024;
/** Prompt lengths (tokens) whose prefill rate is measured. */
export const PROMPT_SIZES = [128, 512];
/** The decode runs' prompt length and the tokens they generate after the first (EOS ignored). */
export const DECODE_PROMPT = 16;
export const DECODE_TOKENS = 128;

const TEXT =
  "Once upon a time, in a small village by the sea, there lived an old fisherman who told stories to the children " +
  "every evening. The stories were about ships, storms, far islands and the strange fish that lived in the deep. ";

/**
 * A prompt of exactly `count` tokens for `encode` (text -> token count) when one exists nearby:
 * the repeated story text cut to the character length whose encoding comes closest.
 */
export function promptOf(count, encode) {
  const long = TEXT.repeat(Math.ceil((count * 8) / TEXT.length) + 1);
  let low = 1;
  let high = long.length;
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    if (encode(long.slice(0, middle)) < count) low = middle + 1;
    else high = middle;
  }
  return long.slice(0, low);
}

/** The prompts of one run: { decode, 128, 512 } as texts, for an engine's `encode`. */
export function promptsFor(encode) {
  const prompts = { decode: promptOf(DECODE_PROMPT, encode) };
  for (const size of PROMPT_SIZES) prompts[size] = promptOf(size, encode);
  return prompts;
}

/**
 * The measurement sequence, the same for every engine. `engine` is
 *   { load(): Promise<void>, prompts(): { decode, 128, 512 } (texts; called after load, untimed),
 *     prefill(text): Promise<{ tokens, tokensPerSec, ttftMs }>, decode(text): Promise<{ tokens, tokensPerSec }> }
 * where decode generates DECODE_TOKENS + 1 tokens greedily with EOS ignored and reports the rate of
 * the DECODE_TOKENS after the first (which comes out of prefill). The first decode after load is
 * the cold one (and the warm-up); prefill and the second decode are then measured warm, the way a
 * server runs. `now` is the runtime's clock in milliseconds.
 */
export async function measureSequence(engine, now) {
  const started = now();
  await engine.load();
  const loadMs = now() - started;
  const prompts = engine.prompts();
  const coldDecode = await engine.decode(prompts.decode);
  const prefill = {};
  for (const size of PROMPT_SIZES) prefill[size] = await engine.prefill(prompts[size]);
  const decode = await engine.decode(prompts.decode);
  return { loadMs, coldDecode, prefill, decode, ttftMs: prefill[PROMPT_SIZES[0]].ttftMs };
}

/**
 * prefill and decode for a model of the @infer/core contract (ours, in Node or in a page), from the
 * model's own metrics; `model()` returns the model once loaded.
 */
export function contractSteps(model, now) {
  const greedy = { temperature: 0, ignoreEos: true };
  return {
    prefill: async (text) => {
      const started = now();
      await model().generateText(text, { ...greedy, maxTokens: 1 });
      const ttftMs = now() - started;
      const metrics = model().metrics();
      return { tokens: metrics.promptTokens, tokensPerSec: metrics.prefillTokensPerSec, ttftMs };
    },
    decode: async (text) => {
      await model().generateText(text, { ...greedy, maxTokens: DECODE_TOKENS + 1 });
      const metrics = model().metrics();
      return { tokens: metrics.generatedTokens - 1, tokensPerSec: metrics.decodeTokensPerSec };
    },
  };
}
