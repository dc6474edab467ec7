/**
 * llama.cpp, driven directly through node-llama-cpp (not through our
 * llama_cpp backend), as an independent oracle for the wasm engine: the
 * tokenization of a prompt, the full-vocabulary logits at its last position,
 * and greedy decoding with the top-2 logit gap at every step.
 *
 * The context is set up to add as little numeric difference of its own as it
 * can: a float32 KV cache (the default F16 cache would round every key and
 * value) and no flash attention (which accumulates in F16 on the CPU).
 */
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";
import { spread } from "./compare.js";

/** One llama.cpp runtime for the process, or why there is none (a test skip reason). */
let runtime: Promise<Llama | string> | undefined;

export function openLlama(): Promise<Llama | string> {
  runtime ??= (async () => {
    try {
      const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
      return await getLlama({
        gpu: false,
        build: "never",
        usePrebuiltBinaries: true,
        skipDownload: true,
        progressLogs: false,
        // Contexts then use exactly the threads they ask for.
        maxThreads: 0,
        logLevel: LlamaLogLevel.error,
      });
    } catch (error) {
      return `node-llama-cpp with a prebuilt CPU binary is not available (${String((error as Error).message).split("\n")[0]})`;
    }
  })();
  return runtime;
}

export async function closeLlama(): Promise<void> {
  const llama = await runtime;
  runtime = undefined;
  if (llama !== undefined && typeof llama !== "string") await llama.dispose();
}

/** llama.cpp's greedy continuation and, per step, how decisive its choice was. */
export interface LlamaGreedy {
  tokens: number[];
  /** [steps] top-1 minus top-2 logit of llama.cpp at each step, over the spread of its logits there. */
  relativeGaps: number[];
}

/**
 * One thread: these models are tiny, and ggml's threads wait for each other
 * by spinning, which on a busy machine with few cores made each token take
 * hundreds of milliseconds instead of a few.
 */
const THREADS = 1;

export class LlamaOracle {
  private constructor(
    private readonly model: LlamaModel,
    readonly context: LlamaContext,
    private readonly sequence: LlamaContextSequence,
  ) {}

  /** Loads a GGUF file; the error message (for a named skip) when llama.cpp refuses it. */
  static async open(llama: Llama, path: string, contextSize: number): Promise<LlamaOracle | string> {
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath: path });
    } catch (error) {
      return `llama.cpp does not load ${path}: ${(error as Error).message}`;
    }
    const context = await model.createContext({
      contextSize,
      sequences: 1,
      threads: THREADS,
      flashAttention: false,
      experimentalKvCacheKeyType: "F32",
      experimentalKvCacheValueType: "F32",
    });
    return new LlamaOracle(model, context, context.getSequence());
  }

  /** The prompt's token ids as llama.cpp feeds them: BOS first when the model asks for it. */
  tokenize(text: string): number[] {
    const bos = this.model.tokens.bos;
    const ids = this.model.tokenize(text, false);
    return this.model.tokens.shouldPrependBosToken && bos !== null ? [bos, ...ids] : ids;
  }

  /** Full-vocabulary logits after `ids` (a fresh sequence each time). */
  async lastLogits(ids: readonly number[]): Promise<Float32Array> {
    await this.sequence.clearHistory();
    return this.evaluate(ids);
  }

  /** Greedy decoding for `steps` tokens after `ids`, never stopping at EOS. */
  async greedy(ids: readonly number[], steps: number): Promise<LlamaGreedy> {
    await this.sequence.clearHistory();
    const tokens: number[] = [];
    const relativeGaps: number[] = [];
    let logits = await this.evaluate(ids);
    for (let step = 0; step < steps; step++) {
      const { best, gap } = topTwo(logits);
      tokens.push(best);
      relativeGaps.push(gap / spread(logits));
      if (step + 1 < steps) logits = await this.evaluate([best]);
    }
    return { tokens, relativeGaps };
  }

  async close(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }

  /** Appends `ids` to the sequence and returns the logits at the last one, indexed by token id. */
  private async evaluate(ids: readonly number[]): Promise<Float32Array> {
    const tokens = ids as readonly Token[];
    const last: [Token, { generateNext: { logits: true } }] = [tokens[tokens.length - 1]!, { generateNext: { logits: true } }];
    const output = await this.sequence.controlledEvaluate([...tokens.slice(0, -1), last]);
    const sparse = output[tokens.length - 1]?.next?.logits;
    if (sparse === undefined) throw new Error("llama.cpp returned no logits at the last position");
    // node-llama-cpp hands them over as a Map sorted by value; index them by id.
    const dense = new Float32Array(sparse.size);
    for (const [id, value] of sparse) dense[id] = value;
    return dense;
  }
}

/** The arg max and the gap between the two largest values. */
export function topTwo(values: ArrayLike<number>): { best: number; gap: number } {
  let best = 0;
  let second = -1;
  for (let i = 1; i < values.length; i++) {
    if (values[i]! > values[best]!) {
      second = best;
      best = i;
    } else if (second < 0 || values[i]! > values[second]!) {
      second = i;
    }
  }
  return { best, gap: second < 0 ? Infinity : values[best]! - values[second]! };
}
