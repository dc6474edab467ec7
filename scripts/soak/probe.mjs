// Measures what a disconnect costs on a model that serves nothing else: how many tokens it
// generates for a stream whose client went away, and when its slot is free again.
import { postJson, readSse, scrape } from "./http.mjs";

const generatedBy = (metrics, model) =>
  (metrics.get(`infer_model_tokens_total{model="${model}",phase="prefill"}`) ?? 0) +
  (metrics.get(`infer_model_tokens_total{model="${model}",phase="decode"}`) ?? 0);

const busy = (metrics, model) =>
  (metrics.get(`infer_active_requests{model="${model}"}`) ?? 0) + (metrics.get(`infer_queue_depth{model="${model}"}`) ?? 0);

/** Polls /metrics (every `everyMs`, at most `timeoutMs`) until `model` has nothing running or waiting. */
export async function waitIdle(url, model, { everyMs = 5, timeoutMs = 10_000 } = {}) {
  const started = performance.now();
  for (;;) {
    const metrics = await scrape(url);
    if (busy(metrics, model) === 0) return { metrics, waitedMs: performance.now() - started };
    if (performance.now() - started > timeoutMs) return { metrics, waitedMs: performance.now() - started, timedOut: true };
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/**
 * One probe: a stream with logprobs (so every token is counted exactly, even one that adds no
 * text) is read for k tokens and aborted at once; then the model's slot must come free. Reports
 * the tokens the model generated for it in all (`generated`) and by the time the server had seen
 * the disconnect (`noticed`). Returns undefined when the stream ended by itself before k tokens.
 */
export async function probeDisconnect(url, model, k) {
  const idle = await waitIdle(url, model);
  if (idle.timedOut) return { violation: `the probe model was still busy ${Math.round(idle.waitedMs)} ms before the probe` };
  const before = generatedBy(idle.metrics, model);
  const controller = new AbortController();
  const res = await postJson(
    `${url}/v1/completions`,
    { model, prompt: "Once upon a time", max_tokens: 400, temperature: 1, logprobs: 0, stream: true },
    { signal: controller.signal },
  );
  if (res.status !== 200) return { violation: `the probe stream answered ${res.status}: ${(await res.text()).slice(0, 200)}` };
  let received = 0;
  const arrivals = [];
  const how = await readSse(res, (event) => {
    if (event === "[DONE]") return false;
    const tokens = event.choices?.[0]?.logprobs?.tokens?.length ?? 0;
    if (tokens > 0) arrivals.push(performance.now());
    received += tokens;
    return received >= k;
  });
  controller.abort();
  const abortedAt = performance.now();
  if (how !== "stopped") return undefined;
  // A request sent after the disconnect: once the server answers it, the disconnect has reached it too
  // (or reaches it in the same turn of its event loop), so from here on the aborted stream may cost at
  // most the token in progress. Tokens before this point were on their way while the disconnect was.
  const noticed = generatedBy(await scrape(url), model) - before;
  const after = await waitIdle(url, model);
  if (after.timedOut) return { violation: `the probe model's slot was still taken ${Math.round(after.waitedMs)} ms after the disconnect` };
  const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]);
  return {
    k,
    received,
    generated: generatedBy(after.metrics, model) - before,
    noticed,
    releaseMs: performance.now() - abortedAt,
    tokenMs: gaps.length ? gaps.reduce((a, b) => a + b, 0) / gaps.length : undefined,
  };
}
