// One fuzzing child: runs cases the parent sends, one at a time, through the public API only, and answers
// each with its outcome. The parent owns time and memory limits; a crash here is the parent's finding.
import { readFile } from "node:fs/promises";
import http from "node:http";
import { join } from "node:path";
import { isInferenceError, loadModel } from "@infer/core";
import "@infer/core/node";
import "@infer/wasm";
import "@infer/llama-cpp";
import { createServer } from "@infer/server";

const GENERATE = { maxTokens: 3, temperature: 0 };
// One thread: starting a kernel worker pool costs more than a tiny model's whole case.
const LOAD = { threads: 1 };
const MESSAGES = [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }];

/** The tiny model and server of the targets that mutate what reaches a loaded model (templates, requests). */
let served;

async function servedModel(backend, modelPath) {
  if (served) return served;
  const model = await loadModel(modelPath, { ...LOAD, backend });
  const server = createServer({ models: { tiny: model } });
  const { url } = await server.listen(0, "127.0.0.1");
  served = { model, server, url };
  return served;
}

/**
 * Loads (with `adapterPath`, for an adapter case), then generates a few greedy tokens: a parse error must
 * surface as a typed error, not later.
 */
async function loadAndGenerate(path, backend, adapterPath) {
  const model = await loadModel(path, { ...LOAD, backend, ...(adapterPath !== undefined && { adapterPath }) });
  try {
    await model.generateText("hi", GENERATE);
    const failure = model.err();
    if (failure) throw failure;
  } finally {
    await model.close();
  }
}

/** Kept-alive connections to the served model, as fetch keeps them; node:http costs a case a fraction of fetch's time. */
const agent = new http.Agent({ keepAlive: true });
const utf8 = new TextDecoder();

/**
 * POSTs `body`, with the very headers fetch sends (the server sees the same request), and resolves with the
 * status and the body as text (decoded as fetch's `text()` does).
 */
function request(url, body) {
  const headers = {
    host: url.host,
    connection: "keep-alive",
    "content-type": "application/json",
    accept: "*/*",
    "accept-language": "*",
    "sec-fetch-mode": "cors",
    "user-agent": "node",
    "accept-encoding": "gzip, deflate",
    "content-length": body.length,
  };
  const send = (retry) =>
    new Promise((resolve, reject) => {
      const req = http.request(url, { method: "POST", agent, headers }, (res) => {
        const chunks = [];
        res.on("data", (chunk) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode, text: utf8.decode(Buffer.concat(chunks)) }));
        res.on("error", reject);
      });
      req.on("error", (error) => {
        // A kept-alive connection the server closed for idleness as this request went out: the request
        // never reached it. Sent again on a new connection, as Node's documentation advises (and fetch does).
        if (retry && req.reusedSocket && (error.code === "ECONNRESET" || error.message === "socket hang up")) resolve(send(false));
        else reject(error);
      });
      req.end(body);
    });
  return send(true);
}

async function post(url, path, body) {
  const response = await request(new URL(url + path), body);
  const text = response.text;
  if (response.status >= 500 || /"code":"internal"/.test(text)) {
    return { outcome: "internal", code: `HTTP ${response.status}`, message: text.slice(0, 500) };
  }
  if (response.status >= 400) {
    let message;
    try {
      message = JSON.parse(text).error?.message;
    } catch {
      // not JSON: an error without OpenAI's shape
    }
    return typeof message === "string"
      ? { outcome: "typed", code: `HTTP ${response.status}`, message }
      : { outcome: "internal", code: `HTTP ${response.status}`, message: `error body without OpenAI's shape: ${text.slice(0, 200)}` };
  }
  return { outcome: "generated", code: `HTTP ${response.status}` };
}

export function classify(error) {
  if (isInferenceError(error) && error.code !== "INTERNAL") return { outcome: "typed", code: error.code, message: error.message };
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const where = error instanceof Error ? (error.stack ?? "").split("\n").slice(1, 4).map((l) => l.trim()).join(" | ") : "";
  return { outcome: "internal", code: isInferenceError(error) ? error.code : "THROWN", message, where };
}

/**
 * A file of a case that is not a model: sent with the case by a campaign (it only carries the text to the
 * API), read from the case's folder for a replayed reproducer.
 */
async function caseFile({ dir, files }, name) {
  const sent = files?.[name];
  return sent === undefined ? readFile(join(dir, name)) : Buffer.from(sent.buffer, sent.byteOffset, sent.byteLength);
}

async function runCase(message) {
  const { dir, target, backend, modelPath } = message;
  try {
    if (target.kind === "model") {
      await loadAndGenerate(join(dir, target.entry), backend);
      return { outcome: "generated" };
    }
    if (target.kind === "adapter") {
      await loadAndGenerate(message.base, backend, join(dir, target.entry));
      return { outcome: "generated" };
    }
    const { model, url } = await servedModel(backend, modelPath);
    if (target.kind === "template") {
      const chatTemplate = (await caseFile(message, "template.jinja")).toString("utf8");
      await model.chatText(MESSAGES, { ...GENERATE, chatTemplate });
      return { outcome: "generated" };
    }
    if (target.kind === "grammar") {
      const grammar = (await caseFile(message, "grammar.gbnf")).toString("utf8");
      await model.generateText("hi", { ...GENERATE, grammar });
      return { outcome: "generated" };
    }
    const request = JSON.parse((await caseFile(message, "request.json")).toString("utf8"));
    return await post(url, request.path, await caseFile(message, "body"));
  } catch (error) {
    return classify(error);
  }
}

process.on("message", async (message) => {
  if (message.type === "warmup") {
    // Starts the backend's runtime (llama.cpp takes seconds) before any case's clock runs.
    try {
      await loadAndGenerate(message.modelPath, message.backend);
      await servedModel(message.backend, message.modelPath);
      process.send({ type: "ready" });
    } catch (error) {
      process.send({ type: "ready", error: classify(error) });
    }
    return;
  }
  const started = performance.now();
  const result = await runCase(message);
  process.send({ type: "result", id: message.id, ms: performance.now() - started, ...result });
});
process.on("disconnect", () => process.exit(0));
