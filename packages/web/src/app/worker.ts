/**
 * The worker that owns the model: loads it through the engine, streams answers back token by
 * token, and stops on request. Nothing here touches the page, so a slow prefill never blocks it.
 */
import type { TextModel } from "@infer/core";
import { completionPrompt } from "./conversation.js";
import { type Engine, importEngine } from "./engine.js";
import { reportOf } from "./errors.js";
import type { AnswerMode, AnswerStats, ModelSource, PageRequest, Settings, WorkerReport } from "./protocol.js";

const scope = self as unknown as { postMessage(report: WorkerReport): void; onmessage: ((event: MessageEvent<PageRequest>) => void) | null };
const post = (report: WorkerReport) => scope.postMessage(report);

/**
 * Lets the worker's event loop run: a stream's tokens may all come as microtasks, and a stop
 * request is a message, which only a task lets in. A MessageChannel round trip is such a task
 * without setTimeout's clamping.
 */
const YIELD_EVERY_MS = 15;
function nextTask(): Promise<void> {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}

let model: TextModel | undefined;
let mode: AnswerMode = "chat";
let running: AbortController | undefined;

/** Whether the model renders chats: one with no template refuses a one-message chat. */
function modeOf(engine: Engine, loaded: TextModel): AnswerMode {
  if (!engine.isTokenizerModel(loaded)) return "completion";
  try {
    loaded.applyChatTemplate([{ role: "user", content: "hello" }]);
    return "chat";
  } catch {
    return "completion";
  }
}

async function load(source: ModelSource): Promise<void> {
  running?.abort();
  const previous = model;
  model = undefined;
  await previous?.close();
  try {
    const engine = await importEngine();
    const loaded = await engine.loadModel(source.kind === "url" ? source.url : source.file, {
      onProgress: ({ phase, loadedBytes, totalBytes }) => post({ type: "progress", phase, loadedBytes, totalBytes }),
    });
    model = loaded;
    mode = modeOf(engine, loaded);
    const info = loaded.info();
    post({
      type: "loaded",
      model: {
        label: source.label,
        architecture: info.architecture,
        parameters: info.parameters,
        contextLength: info.contextLength,
        quantBits: info.quantBits,
        mode,
        warnings: info.warnings ?? [],
      },
    });
  } catch (error) {
    post({ type: "load-failed", error: reportOf(error) });
  }
}

async function answer(request: PageRequest & { type: "generate" }): Promise<void> {
  if (!model) return post({ type: "answer-failed", error: { code: "INVALID_OPTION", message: "no model is loaded" } });
  const controller = new AbortController();
  running = controller;
  const { temperature, topP, maxTokens }: Settings = request.settings;
  const options = { temperature, topP, maxTokens, signal: controller.signal };
  const started = performance.now();
  let first: number | undefined;
  let last = started;
  let generated = 0;
  const stats = (finishReason: AnswerStats["finishReason"]): AnswerStats => ({
    generatedTokens: generated,
    timeToFirstTokenMs: first === undefined ? 0 : first - started,
    tokensPerSecond: first !== undefined && generated > 1 && last > first ? ((generated - 1) * 1000) / (last - first) : 0,
    finishReason,
  });
  try {
    const stream = mode === "chat" ? model.chat(request.messages, options) : model.generate(completionPrompt(request.messages), options);
    let yielded = started;
    for await (const token of stream) {
      last = performance.now();
      first ??= last;
      generated++;
      post({ type: "token", text: token.text });
      if (last - yielded > YIELD_EVERY_MS) {
        await nextTask();
        yielded = performance.now();
      }
    }
    post({ type: "done", stats: stats(generated >= maxTokens ? "length" : "stop") });
  } catch (error) {
    if (controller.signal.aborted) post({ type: "done", stats: stats("abort") });
    else post({ type: "answer-failed", error: reportOf(error) });
  } finally {
    if (running === controller) running = undefined;
  }
}

scope.onmessage = ({ data }) => {
  if (data.type === "load") void load(data.source);
  else if (data.type === "generate") void answer(data);
  else if (data.type === "stop") running?.abort();
};
