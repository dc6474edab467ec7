// The soak's request mix: every kind sends one request, checks its answer and records what it saw.
import { errorShapeProblem, postJson, rawRequest, readSse, timedFetch } from "./http.mjs";

const PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben went to the park. They", "One day, a bird", "The sun"];
const MAX_TOKENS = [4, 8, 16, 32, 64];
const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];

/** What the soak saw, by request kind; `violations` are what make it fail. */
export class Tally {
  kinds = new Map();
  violations = [];
  tokens = 0;

  record(kind, status, tokens = 0) {
    const k = this.kinds.get(kind) ?? { count: 0, statuses: {} };
    k.count++;
    k.statuses[status] = (k.statuses[status] ?? 0) + 1;
    this.kinds.set(kind, k);
    this.tokens += tokens;
  }

  violation(kind, text) {
    this.violations.push(`${kind}: ${text}`);
  }

  get requests() {
    return [...this.kinds.values()].reduce((n, k) => n + k.count, 0);
  }

  statusCounts() {
    const all = {};
    for (const k of this.kinds.values()) for (const [s, n] of Object.entries(k.statuses)) all[s] = (all[s] ?? 0) + n;
    return all;
  }
}

/** Checks an error answer: the status expected and OpenAI's error shape. */
async function expectError(tally, kind, res, expected) {
  const text = await res.text();
  tally.record(kind, res.status);
  if (res.status !== expected) return tally.violation(kind, `status ${res.status}, expected ${expected}: ${text.slice(0, 300)}`);
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    return tally.violation(kind, `a ${res.status} whose body is not JSON: ${text.slice(0, 300)}`);
  }
  const problem = errorShapeProblem(body);
  if (problem) tally.violation(kind, `${problem}: ${text.slice(0, 300)}`);
}

function completionBody(ctx, chat, stream) {
  const maxTokens = pick(MAX_TOKENS);
  const body = {
    model: ctx.model,
    max_tokens: maxTokens,
    temperature: pick([0, 0.8]),
    stream,
    ...(Math.random() < 0.3 ? { stop: [pick([".", "\n", " the"])] } : {}),
    ...(stream && Math.random() < 0.5 ? { stream_options: { include_usage: true } } : {}),
  };
  if (chat) body.messages = [{ role: "user", content: pick(PROMPTS) }];
  else body.prompt = pick(PROMPTS);
  return body;
}

function choiceText(chat, choice) {
  return chat ? choice?.message?.content : choice?.text;
}

async function completion(ctx, tally, chat) {
  const kind = chat ? "chat" : "completion";
  const body = completionBody(ctx, chat, false);
  const res = await postJson(`${ctx.url}/v1/${chat ? "chat/completions" : "completions"}`, body);
  const answer = await res.json().catch(() => undefined);
  const tokens = answer?.usage?.completion_tokens ?? 0;
  tally.record(kind, res.status, res.status === 200 ? tokens : 0);
  if (res.status !== 200) return tally.violation(kind, `status ${res.status}: ${JSON.stringify(answer).slice(0, 300)}`);
  const choice = answer?.choices?.[0];
  if (answer.object !== (chat ? "chat.completion" : "text_completion") || typeof choiceText(chat, choice) !== "string") {
    return tally.violation(kind, `malformed answer ${JSON.stringify(answer).slice(0, 300)}`);
  }
  if (!["stop", "length"].includes(choice.finish_reason)) tally.violation(kind, `finish_reason ${choice.finish_reason}`);
  if (!(tokens <= body.max_tokens)) tally.violation(kind, `${tokens} completion tokens over max_tokens ${body.max_tokens}`);
}

async function streamed(ctx, tally, chat) {
  const kind = chat ? "chat stream" : "completion stream";
  const body = completionBody(ctx, chat, true);
  const res = await postJson(`${ctx.url}/v1/${chat ? "chat/completions" : "completions"}`, body);
  if (res.status !== 200 || !res.headers.get("content-type")?.startsWith("text/event-stream")) {
    tally.record(kind, res.status);
    return tally.violation(kind, `status ${res.status} (${res.headers.get("content-type")}): ${(await res.text()).slice(0, 300)}`);
  }
  let chunks = 0;
  let finish;
  let usage;
  let done = false;
  const problems = [];
  await readSse(res, (event) => {
    if (event === "[DONE]") return !(done = true);
    if (event.error) problems.push(`in-band error ${JSON.stringify(event.error)}`);
    if (event.usage) usage = event.usage;
    const choice = event.choices?.[0];
    if (choice?.finish_reason) finish = choice.finish_reason;
    if ((chat ? choice?.delta?.content : choice?.text)) chunks++;
    return false;
  });
  const tokens = usage?.completion_tokens ?? chunks;
  tally.record(kind, 200, tokens);
  if (!done) problems.push("no [DONE]");
  if (!["stop", "length"].includes(finish)) problems.push(`finish_reason ${finish}`);
  if (body.stream_options && !usage) problems.push("include_usage asked, no usage chunk");
  if (usage && !(usage.completion_tokens <= body.max_tokens)) problems.push(`${usage.completion_tokens} tokens over max_tokens ${body.max_tokens}`);
  for (const p of problems) tally.violation(kind, p);
}

/** A client that goes away after k text chunks of a long stream. */
async function disconnect(ctx, tally) {
  const kind = "disconnect";
  const chat = ctx.chat && Math.random() < 0.5;
  const k = 1 + Math.floor(Math.random() * 8);
  const controller = new AbortController();
  const body = chat
    ? { model: ctx.model, messages: [{ role: "user", content: pick(PROMPTS) }], max_tokens: 200, stream: true }
    : { model: ctx.model, prompt: pick(PROMPTS), max_tokens: 200, stream: true };
  const res = await postJson(`${ctx.url}/v1/${chat ? "chat/completions" : "completions"}`, body, { signal: controller.signal });
  if (res.status !== 200) {
    tally.record(kind, res.status);
    return tally.violation(kind, `status ${res.status}`);
  }
  let chunks = 0;
  const how = await readSse(res, (event) => {
    if (event !== "[DONE]" && (chat ? event.choices?.[0]?.delta?.content : event.choices?.[0]?.text)) chunks++;
    return chunks >= k;
  }).catch((error) => `failed: ${error.message}`);
  controller.abort();
  tally.record(how === "stopped" ? "disconnect" : "disconnect (ended first)", 200, chunks);
  if (how !== "stopped" && how !== "ended") tally.violation(kind, how);
}

async function embeddings(ctx, tally) {
  const format = pick(["float", "base64"]);
  const input = Math.random() < 0.5 ? pick(PROMPTS) : [pick(PROMPTS), pick(PROMPTS)];
  const res = await postJson(`${ctx.url}/v1/embeddings`, { model: ctx.model, input, encoding_format: format });
  const answer = await res.json().catch(() => undefined);
  tally.record("embeddings", res.status);
  if (res.status !== 200) return tally.violation("embeddings", `status ${res.status}: ${JSON.stringify(answer).slice(0, 300)}`);
  const want = Array.isArray(input) ? input.length : 1;
  const ok = answer?.data?.length === want && answer.data.every((d) => (format === "float" ? Array.isArray(d.embedding) && d.embedding.every(Number.isFinite) : typeof d.embedding === "string"));
  if (!ok) tally.violation("embeddings", `malformed answer ${JSON.stringify(answer).slice(0, 200)}`);
}

async function getJson(ctx, tally, kind, path, check) {
  const res = await timedFetch(`${ctx.url}${path}`);
  const text = await res.text();
  tally.record(kind, res.status);
  if (res.status !== 200) return tally.violation(kind, `status ${res.status}: ${text.slice(0, 300)}`);
  if (!check(text)) tally.violation(kind, `unexpected answer ${text.slice(0, 300)}`);
}

const safeJson = (text) => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

/** Requests the server must refuse with a 4xx in OpenAI's error shape, each with the status it must get. */
const MALFORMED = [
  ["bad json", (ctx) => timedFetch(`${ctx.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"prompt": "x",' }), 400],
  ["empty body", (ctx) => timedFetch(`${ctx.url}/v1/chat/completions`, { method: "POST" }), 400],
  ["wrong type", (ctx) => postJson(`${ctx.url}/v1/completions`, { model: ctx.model, prompt: "x", stream: "yes" }), 400],
  ["wrong type", (ctx) => postJson(`${ctx.url}/v1/chat/completions`, { model: ctx.model, messages: "hello" }), 400],
  ["out of range", (ctx) => postJson(`${ctx.url}/v1/completions`, { model: ctx.model, prompt: "x", temperature: 7 }), 400],
  ["out of range", (ctx) => timedFetch(`${ctx.url}/v1/completions`, { method: "POST", body: '{"prompt":"x","max_tokens":1e309}' }), 400],
  ["unknown model", (ctx) => postJson(`${ctx.url}/v1/completions`, { model: "no-such-model", prompt: "x" }), 404],
  ["bad path", (ctx) => timedFetch(`${ctx.url}/v1/nothing-here`), 404],
  ["bad percent-encoding", (ctx) => timedFetch(`${ctx.url}/v1/models/%E0%A4%A`), 400],
  ["bad method", (ctx) => timedFetch(`${ctx.url}/v1/completions`, { method: "DELETE" }), 405],
  ["bad method", (ctx) => timedFetch(`${ctx.url}/v1/models`, { method: "POST", body: "{}" }), 405],
];

async function malformed(ctx, tally) {
  const [kind, send, expected] = pick(MALFORMED);
  await expectError(tally, `malformed: ${kind}`, await send(ctx), expected);
}

/** Requests only a raw socket can send: broken HTTP, oversized bodies. */
const RAW = [
  ["bad content-length", () => ["POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"], 400],
  ["bad chunking", () => ["POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"], 400],
  ["oversized (declared)", () => [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${5 << 20}\r\n\r\n{"prompt":`], 413],
  ["oversized (chunked)", () => {
    const piece = Buffer.alloc(1 << 20, 0x61);
    const chunk = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")]);
    return [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`, chunk, chunk, chunk, chunk, chunk];
  }, 413],
  ["huge headers", () => [`GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Filler: ${"a".repeat(64 * 1024)}\r\n\r\n`], 431],
];

async function rawMalformed(ctx, tally) {
  const [kind, chunks, expected] = pick(RAW);
  const answer = await rawRequest(ctx.url, chunks(), { timeoutMs: 30_000 });
  const name = `raw: ${kind}`;
  tally.record(name, answer.status);
  if (answer.status !== expected) return tally.violation(name, `status ${answer.status}, expected ${expected}: ${answer.head.slice(0, 200)}`);
  const problem = errorShapeProblem(safeJson(answer.body));
  if (problem) tally.violation(name, `${problem}: ${answer.body.slice(0, 200)}`);
}

/** A well-formed request whose body trickles in over about two seconds: answered normally. */
async function slowBody(ctx, tally) {
  const body = JSON.stringify({ model: ctx.model, prompt: pick(PROMPTS), max_tokens: 4 });
  const pieces = body.match(/.{1,6}/gs);
  const head = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  const answer = await rawRequest(ctx.url, [head, ...pieces], { gapMs: Math.ceil(2000 / pieces.length), timeoutMs: 60_000 });
  tally.record("slow body", answer.status);
  if (answer.status !== 200) return tally.violation("slow body", `status ${answer.status}: ${answer.body.slice(0, 200)}`);
  if (typeof safeJson(answer.body)?.choices?.[0]?.text !== "string") tally.violation("slow body", `malformed answer ${answer.body.slice(0, 200)}`);
}

/** Headers that stop half way: the server's headers timeout answers 408 and closes the connection. */
export async function stalledHeaders(ctx, tally) {
  const answer = await rawRequest(ctx.url, ["POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-"], { timeoutMs: 40_000 });
  tally.record("stalled headers", answer.status);
  if (answer.status !== 408) return tally.violation("stalled headers", `status ${answer.status}, expected 408`);
  const problem = errorShapeProblem(safeJson(answer.body));
  if (problem) tally.violation("stalled headers", problem);
}

/** A body that stops half way: the server's request timeout (30 s by default) answers 408. */
export async function stalledBody(ctx, tally) {
  const head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
  const answer = await rawRequest(ctx.url, [head, '{"prompt": "Once'], { timeoutMs: 60_000 });
  tally.record("stalled body", answer.status);
  if (answer.status !== 408) return tally.violation("stalled body", `status ${answer.status}, expected 408`);
  const problem = errorShapeProblem(safeJson(answer.body));
  if (problem) tally.violation("stalled body", problem);
}

/** The mix: [weight, name, send]; kinds the model cannot serve are left out. */
export function requestMix({ chat, embeddings: withEmbeddings }) {
  return [
    [20, "completion", (ctx, t) => completion(ctx, t, false)],
    [20, "completion stream", (ctx, t) => streamed(ctx, t, false)],
    ...(chat ? [[8, "chat", (ctx, t) => completion(ctx, t, true)], [8, "chat stream", (ctx, t) => streamed(ctx, t, true)]] : []),
    [10, "disconnect", disconnect],
    ...(withEmbeddings ? [[5, "embeddings", embeddings]] : []),
    [3, "models", (ctx, t) => getJson(ctx, t, "models", "/v1/models", (text) => safeJson(text)?.data?.some((m) => m.id === ctx.model))],
    [2, "models", (ctx, t) => getJson(ctx, t, "models", `/v1/models/${ctx.model}`, (text) => safeJson(text)?.id === ctx.model)],
    [2, "metrics", (ctx, t) => getJson(ctx, t, "metrics", "/metrics", (text) => text.includes("infer_requests_total"))],
    [2, "health", (ctx, t) => getJson(ctx, t, "health", "/health", (text) => safeJson(text)?.status === "ok")],
    [10, "malformed", malformed],
    [3, "raw", rawMalformed],
    [1, "slow body", slowBody],
  ];
}

/** One [weight, name, send] entry of `mix`, picked with probability proportional to its weight. */
export function pickWeighted(mix) {
  const total = mix.reduce((n, [w]) => n + w, 0);
  let r = Math.random() * total;
  for (const entry of mix) if ((r -= entry[0]) < 0) return entry;
  return mix.at(-1);
}
