import { EventEmitter } from "node:events";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { PassThrough, Readable } from "node:stream";
import {
  BaseTextModel,
  type BatchSink,
  type ClassifyResult,
  type FinishReason,
  makeMetrics,
  type Message,
  type ModelInfo,
  type PromptInput,
  register,
  type ResolvedGenerateOptions,
  decodeInto,
  type Token,
} from "@infer/core";
import { type CliIO, main } from "../src/index.js";

export const ANSWER = ["Once", " upon", " a", " time"];

/** Backend "fake": loads any existing `*.fake` file as a scripted model and remembers what it was asked. */
export class FakeModel extends BaseTextModel {
  static last: FakeModel | undefined;
  readonly modelType = "fake";
  readonly backend = "fake";
  prompts: string[] = [];
  options: ResolvedGenerateOptions[] = [];
  aborts = 0;

  constructor(readonly path: string) {
    super();
    FakeModel.last = this;
  }

  info(): ModelInfo {
    return { architecture: "fake", vocabSize: 32, numLayers: 2, hiddenSize: 8, contextLength: 128, quantBits: 32, quantGroup: 0, format: "unknown" };
  }

  protected async *stream(input: PromptInput, options: ResolvedGenerateOptions, signal: AbortSignal): AsyncGenerator<Token, FinishReason> {
    this.prompts.push(input.text);
    this.options.push(options);
    let produced = 0;
    try {
      // Read live, so a test can change the script between two answers of one loaded model.
      for (const [id, text] of fakeBehaviour.answer.entries()) {
        if (fakeBehaviour.delayMs) await new Promise((r) => setTimeout(r, fakeBehaviour.delayMs));
        produced++;
        yield { id, text };
      }
      return "stop";
    } finally {
      if (signal.aborted) this.aborts++;
      this.lastMetrics = makeMetrics({ promptTokens: 3, generatedTokens: produced, prefillMs: 1, decodeMs: 2, totalMs: 3 });
    }
  }

  protected renderChat(messages: Message[]): string {
    return messages.map((m) => `<${m.role}>${m.content}`).join("") + "<assistant>";
  }
  protected async runClassify(): Promise<ClassifyResult[]> {
    return [];
  }
  /** One scripted answer per input, one after another (the server batches requests through here). */
  protected async runBatch(inputs: PromptInput[], options: ResolvedGenerateOptions, signal: AbortSignal, sink: BatchSink): Promise<void> {
    for (const [index, input] of inputs.entries()) await decodeInto(sink, index, async () => this.stream(input, options, signal));
  }
  protected async dispose(): Promise<void> {}
}

export const fakeBehaviour = { delayMs: 0, answer: ANSWER };

register({
  name: "fake",
  available: () => true,
  canLoad: async (path) => path.endsWith(".fake"),
  loadModel: async (path) => new FakeModel(path),
});

export interface Captured {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `infer <argv>` in-process with captured streams; `during` may act while it runs (e.g. send SIGINT). */
export async function runCli(
  argv: string[],
  options: { stdin?: string | Readable; env?: NodeJS.ProcessEnv; signals?: EventEmitter; during?: (io: CliIO, output: () => string) => Promise<void> } = {},
): Promise<Captured> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (c: Buffer) => (out += c.toString()));
  stderr.on("data", (c: Buffer) => (err += c.toString()));
  const io: CliIO = {
    stdout,
    stderr,
    stdin: typeof options.stdin === "object" ? options.stdin : Readable.from(options.stdin !== undefined ? [Buffer.from(options.stdin)] : []),
    env: options.env ?? { INFER_CACHE: "/nonexistent-infer-cache" },
    signals: options.signals ?? new EventEmitter(),
  };
  const running = main(argv, io);
  if (options.during) await options.during(io, () => out + err);
  const code = await running;
  return { code, stdout: out, stderr: err };
}

export async function waitFor(check: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A minimal Hugging Face compatible hub serving one repository with one LFS file. */
export async function tinyHub(repo: string, path: string, content: Buffer): Promise<{ url: string; server: Server }> {
  const oid = createHash("sha256").update(content).digest("hex");
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x").pathname;
    if (url === `/api/models/${repo}/tree/main`) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify([{ type: "file", path, size: content.length, oid: "0".repeat(40), lfs: { oid, size: content.length } }]));
    } else if (url === `/${repo}/resolve/main/${path}`) {
      res.writeHead(200, { "content-length": content.length });
      res.end(content);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}
