// HTTP request bodies: valid OpenAI requests (chat, text completion, embeddings), JSON-mutated with a bias
// towards the fields the server reads.
import { mutateJsonText } from "./mutate-json.mjs";

export const SEED_REQUESTS = [
  { path: "/v1/chat/completions", body: { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 3, temperature: 0 } },
  {
    path: "/v1/chat/completions",
    body: { model: "tiny", messages: [{ role: "system", content: "be brief" }, { role: "user", content: [{ type: "text", text: "hi" }] }], max_tokens: 2, stream: true, stream_options: { include_usage: true }, stop: ["\n"], seed: 1 },
  },
  { path: "/v1/chat/completions", body: { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2, logprobs: true, top_logprobs: 2, response_format: { type: "text" } } },
  { path: "/v1/completions", body: { model: "tiny", prompt: "once upon", max_tokens: 3, temperature: 0.7, top_p: 0.9, top_k: 5, min_p: 0.05, repeat_penalty: 1.1, echo: true } },
  { path: "/v1/completions", body: { prompt: ["hi"], max_tokens: 2, logprobs: 2, stream: true } },
  { path: "/v1/embeddings", body: { model: "tiny", input: ["hi", "there"], encoding_format: "base64" } },
];

const REQUEST_FIELDS =
  /^(model|messages|role|content|type|text|prompt|max_tokens|max_completion_tokens|temperature|top_p|top_k|min_p|repeat_penalty|stop|seed|stream|stream_options|include_usage|logprobs|top_logprobs|response_format|n|echo|input|encoding_format)$/;

/** Bodies are capped so one case stays a request, not a load test (the server's own limit is 4 MiB). */
const MAX_BODY = 1 << 20;

export function mutateRequest(r, index) {
  const seed = SEED_REQUESTS[index % SEED_REQUESTS.length];
  const mutant = mutateJsonText(r, JSON.stringify(seed.body), REQUEST_FIELDS);
  const path = r.chance(0.03) ? r.pick(["/v1/models/tiny", "/v1/chat", "/v1/completions/", "/health"]) : seed.path;
  const body = mutant.raw ?? Buffer.from(mutant.text.slice(0, MAX_BODY), "utf8");
  return { path, body, tags: [`http${seed.path}#${index % SEED_REQUESTS.length}`, ...mutant.tags] };
}
