// The child process of an isolated llama_cpp model (LoadOptions.isolate): it loads the model and runs
// the calls its parent sends (isolate-protocol.ts). The parent's BaseTextModel has already validated,
// queued and resolved each call and applies stop strings and maxTokens itself, so the child runs only
// the backend half of LlamaCppModel: the hooks BaseTextModel calls (stream, runBatch, runClassify). A stream
// decodes one token per token the parent asks for; a batch, whose sink must answer at once, runs copies of
// the parent's stoppers to end each sequence where the parent does.
import {
  type BatchSink,
  type ClassifyOptions,
  type ClassifyResult,
  type FinishReason,
  type ProbeKind,
  type PromptInput,
  type ResolvedGenerateOptions,
  SequenceStopper,
  type Token,
} from "@infer/core";
import type { CallRequest, ChildMessage, ParentMessage } from "./isolate-protocol.js";
import { toPortableError } from "./isolate-protocol.js";
import { loadLlamaCppModel } from "./load.js";
import { LlamaCppModel } from "./model.js";

/** LlamaCppModel's protected BaseTextModel hooks, which the child calls directly (see the top of this file). */
interface BackendHalf {
  stream(input: PromptInput, options: ResolvedGenerateOptions, signal: AbortSignal): AsyncGenerator<Token, FinishReason | void, undefined>;
  runBatch(inputs: PromptInput[], options: ResolvedGenerateOptions, signal: AbortSignal, sink: BatchSink): Promise<void>;
  runClassify(prompts: string[], options: ClassifyOptions, signal: AbortSignal): Promise<ClassifyResult[]>;
}

/** A call the parent started and has not seen end. */
interface RunningCall {
  readonly stop: AbortController;
  /** Resolves a stream waiting for the parent's `next` (true) or `stop` (false). */
  wake?: (more: boolean) => void;
}

let model: LlamaCppModel | undefined;
const calls = new Map<number, RunningCall>();
/** Decoding calls run one at a time: an aborted call may still be unwinding when the next arrives. */
let queue: Promise<void> = Promise.resolve();
/** The probe kinds the parent's sinks want during the running call (the sink below reads it at each event). */
const wanted: ProbeKind[] = [];
let probeCall = 0;

function send(message: ChildMessage): void {
  process.send?.(message);
}

process.on("message", (message: ParentMessage) => {
  switch (message.type) {
    case "load":
      void load(message.path, message.options);
      break;
    case "call": {
      const call: RunningCall = { stop: new AbortController() };
      calls.set(message.id, call);
      // Embeddings have a context of their own and a template renders without the model's decoding
      // state: as in process, they need not wait for the calls before them.
      const { id, request, probeKinds } = message;
      if (request.kind === "embed" || request.kind === "render") void run(id, call, request);
      else queue = queue.then(() => decoding(id, call, request, probeKinds));
      break;
    }
    case "next":
      calls.get(message.id)?.wake?.(true);
      break;
    case "stop": {
      const call = calls.get(message.id);
      call?.stop.abort("stopped by the parent process");
      call?.wake?.(false);
      break;
    }
    case "close":
      void close();
      break;
  }
});

// Without its parent the child has no one to serve: it goes too (the model is freed with the process).
process.on("disconnect", () => process.exit(0));

async function load(path: string, options: Parameters<typeof loadLlamaCppModel>[1]): Promise<void> {
  try {
    const loaded = await loadLlamaCppModel(path, {
      ...options,
      probe: { kinds: wanted, emit: (event) => send({ type: "probe", id: probeCall, event }) },
    });
    if (!(loaded instanceof LlamaCppModel)) throw new Error("the child process loaded an isolated model");
    model = loaded;
    send({ type: "loaded", info: model.info() });
  } catch (error) {
    send({ type: "load-failed", error: toPortableError(error) });
  }
}

/** A call that decodes, alone: the probe events meanwhile are its. */
async function decoding(id: number, call: RunningCall, request: CallRequest, probeKinds: ProbeKind[]): Promise<void> {
  wanted.splice(0, wanted.length, ...probeKinds);
  probeCall = id;
  try {
    await run(id, call, request);
  } finally {
    wanted.length = 0;
  }
}

async function run(id: number, call: RunningCall, request: CallRequest): Promise<void> {
  const loaded = model!;
  try {
    if (call.stop.signal.aborted) throw new Error("stopped before it started");
    const value = await perform(loaded, id, call, request);
    send({ type: "done", id, value, metrics: loaded.metrics() });
  } catch (error) {
    send({ type: "failed", id, error: toPortableError(error), metrics: loaded.metrics() });
  } finally {
    calls.delete(id);
  }
}

async function perform(loaded: LlamaCppModel, id: number, call: RunningCall, request: CallRequest): Promise<unknown> {
  const half = loaded as unknown as BackendHalf;
  const { signal } = call.stop;
  switch (request.kind) {
    case "stream": {
      const inner = half.stream(request.input, request.options as ResolvedGenerateOptions, signal);
      try {
        for (;;) {
          const step = await inner.next();
          if (step.done) return step.value ?? "stop";
          if (signal.aborted) return "stop";
          const asked = new Promise<boolean>((resolve) => (call.wake = resolve));
          send({ type: "token", id, token: step.value });
          if (!(await asked)) return "stop";
        }
      } finally {
        await inner.return(undefined);
      }
    }
    case "batch": {
      // The parent's sink applies each prompt's stop strings and maxTokens, but its answer would come a step late;
      // the same stoppers here end each sequence at the very token the parent's end it at.
      const stoppers = request.inputs.map((input) => new SequenceStopper({ maxTokens: request.options.maxTokens, stopStrings: input.stopStrings }));
      const sink: BatchSink = {
        token: (index, token) => {
          send({ type: "token", id, index, token });
          const stopper = stoppers[index]!;
          stopper.push(token);
          return stopper.done === undefined;
        },
        end: (index, reason, error) =>
          send({ type: "end", id, index, reason, ...(error !== undefined && { error: toPortableError(error) }) }),
      };
      await half.runBatch(request.inputs, request.options as ResolvedGenerateOptions, signal, sink);
      return undefined;
    }
    case "classify":
      return half.runClassify(request.prompts, request.options, signal);
    case "embed":
      return loaded.embed(request.texts, { signal, normalize: request.normalize });
    case "render":
      return loaded.applyChatTemplate(request.messages, { chatTemplate: request.chatTemplate });
  }
}

async function close(): Promise<void> {
  for (const call of calls.values()) {
    call.stop.abort("the model is closing");
    call.wake?.(false);
  }
  await queue;
  await model?.close();
  process.exit(0);
}
