import { type GenerateOptions, grammarProblem, InferenceError, randomSeed } from "@infer/core";
import type { Llama, LlamaGrammar, LlamaModel, SequenceEvaluateOptions } from "node-llama-cpp";
import { asLlamaTokens, nodeLlamaCpp } from "./runtime.js";

/** The sampler settings of one call, in node-llama-cpp's terms. */
export interface SamplerSettings {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  seed: number;
  repeatPenalty: number;
  repeatLastN: number;
}

/**
 * Fills unset fields from `defaults` and pins a seed: node-llama-cpp would
 * otherwise seed from the clock, so two calls in one second would repeat.
 */
export function samplerSettings(options: GenerateOptions, defaults: Omit<SamplerSettings, "seed">): SamplerSettings {
  return {
    temperature: options.temperature ?? defaults.temperature,
    topK: options.topK ?? defaults.topK,
    topP: options.topP ?? defaults.topP,
    minP: options.minP ?? defaults.minP,
    repeatPenalty: options.repeatPenalty ?? defaults.repeatPenalty,
    repeatLastN: options.repeatLastN ?? defaults.repeatLastN,
    seed: options.seed ?? randomSeed(),
  };
}

/**
 * node-llama-cpp's evaluate options for these settings. `history` is the live
 * array of prompt + generated ids: the repeat penalty looks at its last
 * `repeatLastN` entries, as llama.cpp's sampler does with the tokens it accepted.
 */
export function evaluateOptions(settings: SamplerSettings, history: readonly number[]): SequenceEvaluateOptions {
  const options: SequenceEvaluateOptions = {
    temperature: settings.temperature,
    topK: settings.topK,
    topP: settings.topP,
    minP: settings.minP,
    seed: settings.seed,
  };
  if (settings.repeatPenalty !== 1 && settings.repeatLastN > 0) {
    options.repeatPenalty = {
      penalty: settings.repeatPenalty,
      maxPunishTokens: settings.repeatLastN,
      punishTokens: () => asLlamaTokens(history.slice(-settings.repeatLastN)),
    };
  }
  return options;
}

/**
 * Compiles `grammar` (GBNF) or `jsonSchema` once per call. Both at once is
 * ambiguous and refused; a grammar llama.cpp cannot parse is INVALID_OPTION.
 */
export async function compileGrammar(
  llama: Llama,
  options: Pick<GenerateOptions, "grammar" | "jsonSchema">,
): Promise<LlamaGrammar | undefined> {
  if (options.grammar === undefined && options.jsonSchema === undefined) return undefined;
  if (options.grammar !== undefined && options.jsonSchema !== undefined) {
    throw new InferenceError("INVALID_OPTION", "generate options 'grammar' and 'jsonSchema' cannot be used together");
  }
  try {
    if (options.jsonSchema !== undefined) {
      const json = await llama.createGrammarForJsonSchema(
        options.jsonSchema as Parameters<Llama["createGrammarForJsonSchema"]>[0],
      );
      // The schema is bounded only by its own size: its grammar gets the limits a grammar option has.
      const problem = grammarProblem(json.grammar);
      if (problem !== undefined) throw new Error(`the GBNF grammar it gives ${problem}`);
      return await llama.createGrammar({ grammar: endAtJsonValue(json.grammar) });
    }
    return await llama.createGrammar({ grammar: options.grammar! });
  } catch (error) {
    const which = options.jsonSchema !== undefined ? "jsonSchema" : "grammar";
    const message = error instanceof Error ? error.message : String(error);
    throw new InferenceError("INVALID_OPTION", `generate option '${which}' could not be compiled: ${message}`, {
      cause: error,
      details: { option: which },
    });
  }
}

/**
 * node-llama-cpp's JSON grammars end with four newlines and then any number
 * more, which its own completion code treats as a stop trigger. Dropping that
 * tail makes the grammar complete right after the JSON value, so llama.cpp's
 * grammar sampler allows only EOS there and generation stops by itself.
 */
function endAtJsonValue(grammar: string): string {
  return grammar
    .split("\n")
    .map((line) => (line.startsWith("root ::=") ? line.replace(/ "(\\n)+" \[\\n\]\*$/, "") : line))
    .join("\n");
}

/** A fresh grammar state for one sequence (each sequence advances its own). */
export async function grammarState(model: LlamaModel, grammar: LlamaGrammar | undefined) {
  if (!grammar) return undefined;
  const { LlamaGrammarEvaluationState } = await nodeLlamaCpp();
  return new LlamaGrammarEvaluationState({ model, grammar });
}
