/**
 * The chat page: picks a model (URL, hf: reference, local file, or one `infer web` serves),
 * hands it to the worker that runs it, and shows the answer as it streams in.
 */
import type { Message } from "@infer/core";
import { ChatView } from "./chat-view.js";
import { pageElements } from "./dom.js";
import { headlineOf, reportOf } from "./errors.js";
import { DownloadMeter, formatBytes } from "./format.js";
import type { ErrorReport, LoadedModel, ModelSource, PageRequest, WorkerReport } from "./protocol.js";
import { SERVED_MODELS_PATH, type ServedModelList } from "./served-models.js";
import { readSettings } from "./settings.js";
import { resolveModelUrl } from "./sources.js";

const ui = pageElements();
/** What the prompt box says until a model is loaded (index.html's text). */
const EMPTY_PLACEHOLDER = ui.prompt.placeholder;
const chat = new ChatView(ui.messages);

type State = "empty" | "loading" | "ready" | "answering";
let state: State = "empty";
let model: LoadedModel | undefined;
/** The conversation the model sees: finished turns only. */
let conversation: Message[] = [];
/** The answer being written: its element and text so far. */
let pending: { body: HTMLElement; text: string; prompt: Message } | undefined;
let meter = new DownloadMeter();
let worker = startWorker();

function startWorker(): Worker {
  const started = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  started.onmessage = (event: MessageEvent<WorkerReport>) => onReport(event.data);
  // A worker that dies (out of memory, a crash in the engine) is replaced: the page stays usable.
  started.onerror = (event) => {
    event.preventDefault();
    showError({ code: "INTERNAL", name: "Error", message: `the model's worker stopped (${event.message || "no reason given"}); load the model again` });
    worker.terminate();
    worker = startWorker();
    unloaded();
  };
  return started;
}

const send = (request: PageRequest) => worker.postMessage(request);

function setState(next: State): void {
  state = next;
  const busy = next === "loading" || next === "answering";
  for (const control of [ui.modelUrl, ui.modelFile, ...ui.servedModels.querySelectorAll("button")]) control.disabled = busy;
  ui.urlForm.querySelector("button")!.disabled = busy;
  ui.send.disabled = next !== "ready";
  ui.send.hidden = next === "answering";
  ui.stop.hidden = next !== "answering";
  ui.progress.hidden = next !== "loading";
  // Screen readers read the answer once it is complete, not token by token.
  ui.messages.setAttribute("aria-busy", String(next === "answering"));
}

function unloaded(): void {
  model = undefined;
  if (pending) chat.markFailed(pending.body);
  pending = undefined;
  ui.modelStatus.textContent = "No model loaded.";
  ui.modeNote.hidden = true;
  ui.prompt.placeholder = EMPTY_PLACEHOLDER;
  setState("empty");
}

function showError(error: ErrorReport): void {
  ui.errorHeadline.textContent = headlineOf(error);
  ui.errorDetail.textContent = `${error.message} (${error.code})`;
  ui.error.hidden = false;
}

function hideError(): void {
  ui.error.hidden = true;
}

function describeModel(loaded: LoadedModel): string {
  const parts = [loaded.architecture];
  if (loaded.parameters) parts.push(`${(loaded.parameters / 1e6).toFixed(loaded.parameters < 1e7 ? 2 : 0)}M parameters`);
  parts.push(`${loaded.quantBits}-bit`, `context ${loaded.contextLength}`);
  return `${loaded.label} (${parts.join(", ")})`;
}

function onReport(report: WorkerReport): void {
  switch (report.type) {
    case "progress": {
      const { loadedBytes, totalBytes, phase } = report;
      ui.progressBar.max = 1;
      if (totalBytes) ui.progressBar.value = Math.min(1, loadedBytes / totalBytes);
      else ui.progressBar.removeAttribute("value");
      if (phase === "download") ui.progressText.textContent = `Downloading: ${meter.describe(loadedBytes, totalBytes, meter.update(loadedBytes, performance.now()))}`;
      else ui.progressText.textContent = `Reading the model into memory: ${totalBytes ? `${formatBytes(loadedBytes)} of ${formatBytes(totalBytes)}` : formatBytes(loadedBytes)}`;
      return;
    }
    case "loaded":
      model = report.model;
      ui.modelStatus.textContent = `Loaded ${describeModel(model)}.`;
      ui.modeNote.hidden = model.mode === "chat" && model.warnings.length === 0;
      ui.modeNote.textContent = [
        model.mode === "completion" ? "This model has no chat template: your messages are continued as plain text (completion)." : "",
        ...model.warnings,
      ].join(" ").trim();
      ui.prompt.placeholder = model.mode === "chat" ? "Message the model (Enter sends, Shift+Enter adds a line)" : "Text for the model to continue (Enter sends, Shift+Enter adds a line)";
      setState("ready");
      ui.prompt.focus();
      return;
    case "load-failed":
      showError(report.error);
      unloaded();
      return;
    case "token":
      if (pending) {
        pending.text += report.text;
        chat.append(pending.body, report.text);
      }
      return;
    case "done": {
      const { stats } = report;
      if (pending) conversation.push(pending.prompt, { role: "assistant", content: pending.text });
      pending = undefined;
      const end = stats.finishReason === "abort" ? " · stopped" : stats.finishReason === "length" ? " · max tokens reached" : "";
      ui.stats.textContent = `${stats.generatedTokens} tokens · ${stats.tokensPerSecond.toFixed(1)} tokens/s · first token after ${Math.round(stats.timeToFirstTokenMs)} ms${end}`;
      ui.stats.dataset.finish = stats.finishReason;
      setState("ready");
      return;
    }
    case "answer-failed":
      // The failed turn stays on screen, marked, but out of the conversation the model sees.
      if (pending) chat.markFailed(pending.body);
      pending = undefined;
      showError(report.error);
      setState("ready");
      return;
  }
}

function load(source: ModelSource): void {
  if (state === "loading" || state === "answering") return;
  hideError();
  conversation = [];
  chat.clear();
  ui.stats.textContent = "";
  meter = new DownloadMeter();
  ui.progressBar.value = 0;
  ui.progressText.textContent = "Starting…";
  ui.modelStatus.textContent = `Loading ${source.label}…`;
  setState("loading");
  send({ type: "load", source });
}

function loadFile(file: File | undefined): void {
  if (file) load({ kind: "file", file, label: `${file.name} (${formatBytes(file.size)})` });
}

function submitPrompt(): void {
  const text = ui.prompt.value;
  if (state !== "ready" || text.trim() === "") return;
  const settings = readSettings({ temperature: ui.temperature.value, topP: ui.topP.value, maxTokens: ui.maxTokens.value });
  if ("invalid" in settings) return showError({ code: "INVALID_OPTION", message: settings.invalid });
  hideError();
  const prompt: Message = { role: "user", content: text };
  chat.add("user", text);
  pending = { body: chat.add("assistant", ""), text: "", prompt };
  ui.prompt.value = "";
  ui.stats.textContent = "Thinking…";
  delete ui.stats.dataset.finish;
  setState("answering");
  send({ type: "generate", messages: [...conversation, prompt], settings });
}

ui.urlForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = ui.modelUrl.value;
  resolveModelUrl(text, location.href).then(
    (url) => load({ kind: "url", url, label: text.trim() }),
    (error: unknown) => showError(reportOf(error)),
  );
});

ui.modelFile.addEventListener("change", () => {
  loadFile(ui.modelFile.files?.[0]);
  ui.modelFile.value = "";
});

// Drag and drop anywhere on the page; the overlay shows while a file is over it.
let dragDepth = 0;
document.addEventListener("dragenter", (event) => {
  if (!event.dataTransfer?.types.includes("Files")) return;
  dragDepth++;
  ui.dropOverlay.hidden = false;
});
document.addEventListener("dragleave", () => {
  dragDepth = Math.max(0, dragDepth - 1);
  if (dragDepth === 0) ui.dropOverlay.hidden = true;
});
document.addEventListener("dragover", (event) => event.preventDefault());
document.addEventListener("drop", (event) => {
  event.preventDefault();
  dragDepth = 0;
  ui.dropOverlay.hidden = true;
  loadFile(event.dataTransfer?.files[0]);
});

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  submitPrompt();
});
ui.prompt.addEventListener("keydown", (event) => {
  // Enter sends; Shift+Enter is a new line; Enter while composing (IME) is the IME's.
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submitPrompt();
  }
});
ui.stop.addEventListener("click", () => send({ type: "stop" }));
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && state === "answering") send({ type: "stop" });
});
ui.reset.addEventListener("click", () => {
  if (state === "answering") send({ type: "stop" });
  conversation = [];
  pending = undefined;
  chat.clear();
  ui.stats.textContent = "";
  hideError();
  ui.prompt.focus();
});
ui.errorClose.addEventListener("click", hideError);

/** The models `infer web` was given, listed by its models.json; a static host without one lists none. */
async function listServedModels(): Promise<void> {
  const response = await fetch(SERVED_MODELS_PATH).catch(() => undefined);
  if (!response?.ok) return;
  const list = (await response.json().catch(() => undefined)) as ServedModelList | undefined;
  if (!Array.isArray(list?.models) || list.models.length === 0) return;
  for (const served of list.models) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `${served.name} (${formatBytes(served.sizeBytes)})`;
    button.addEventListener("click", () => load({ kind: "url", url: new URL(served.url, location.href).href, label: served.name }));
    item.append(button);
    ui.servedModels.append(item);
  }
  ui.served.hidden = false;
}

setState("empty");
void listServedModels();
