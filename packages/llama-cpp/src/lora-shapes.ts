// A LoRA adapter's tensor shapes against the model it is applied to, where llama.cpp's own checks stop
// short. Its LoRA loader compares the first two dimensions of each pair with the model's tensor (a
// mismatch is a clean error), but not the rest, nor the two halves' rank for token_embd, nor whether
// token_embd doubles as the output projection: each of those passed the load and then aborted the first
// generation (ggml_mul_mat's GGML_ASSERT(ggml_can_mul_mat(a, b))).
import type { GgufHeader, GgufTensorInfo } from "@infer/formats";
import { formatError } from "./format-error.js";

interface LoraPair {
  base: GgufTensorInfo;
  a: GgufTensorInfo;
  b: GgufTensorInfo;
}

/** Shapes are ggml order (ne0 first): lora_a is [in, rank], lora_b [rank, out]; for token_embd the halves swap roles. */
export function assertLoraShapes(adapter: GgufHeader, model: GgufHeader): void {
  for (const { base, a, b } of loraPairs(adapter, model)) {
    for (const half of [a, b]) {
      const beyond = (shape: readonly number[]) => [shape[2] ?? 1, shape[3] ?? 1];
      const [want, got] = [beyond(base.shape), beyond(half.shape)];
      if (want[0] !== got[0] || want[1] !== got[1]) {
        throw formatError(
          adapter.source,
          `tensor "${half.name}"`,
          `has shape [${half.shape.join(", ")}]; past its first two dimensions llama.cpp needs those of "${base.name}" [${base.shape.join(", ")}]`,
        );
      }
    }
    if (base.name !== "token_embd.weight") continue;
    // llama.cpp looks a LoRA up by tensor name, and a model without output.weight multiplies by token_embd
    // again for the logits, where the embedding LoRA's halves have the wrong layout for it.
    if (!model.tensorByName("output.weight")) {
      throw formatError(
        adapter.source,
        `tensor "${a.name}"`,
        `adapts token_embd.weight, which this model (no output.weight) also uses as its output projection; llama.cpp cannot apply an embedding LoRA there`,
      );
    }
    if (a.shape[0] !== b.shape[0]) {
      throw formatError(adapter.source, `tensor "${b.name}"`, `has rank ${b.shape[0]} and "${a.name}" rank ${a.shape[0]}; they must agree`);
    }
  }
}

/** The complete pairs whose model tensor exists: llama.cpp refuses the others itself, with a clear message. */
function loraPairs(adapter: GgufHeader, model: GgufHeader): LoraPair[] {
  const pairs: LoraPair[] = [];
  for (const a of adapter.tensors) {
    if (!a.name.endsWith(".lora_a")) continue;
    const name = a.name.slice(0, -".lora_a".length);
    const b = adapter.tensorByName(`${name}.lora_b`);
    const base = model.tensorByName(name);
    if (b && base) pairs.push({ base, a, b });
  }
  return pairs;
}
