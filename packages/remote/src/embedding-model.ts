import { abortedError, type EmbeddingModel } from "@infer/core";
import { remoteError } from "./failures.js";
import { RemoteModel } from "./model.js";

/** A remote model whose server answered `/v1/embeddings` at load. */
export class RemoteEmbeddingModel extends RemoteModel implements EmbeddingModel {
  async embed(texts: string[], options: { signal?: AbortSignal; normalize?: boolean } = {}): Promise<Float32Array[]> {
    return this.exclusive(async (signal) => {
      if (!Array.isArray(texts) || !texts.every((t) => typeof t === "string")) {
        throw remoteError(this.endpoint.url, "embed() takes an array of strings");
      }
      if (texts.length === 0) return [];
      const url = `${this.endpoint.apiBase}/embeddings`;
      const { body } = await this.http.json(url, { model: this.facts.model, input: texts }, signal);
      if (signal.aborted) throw abortedError(signal.reason);
      const data = (body as { data?: { index?: number; embedding?: unknown }[] }).data;
      if (!Array.isArray(data) || data.length !== texts.length) {
        throw remoteError(url, `answered ${Array.isArray(data) ? data.length : "no"} embeddings for ${texts.length} inputs`);
      }
      const ordered = [...data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
      return ordered.map((item) => {
        if (!Array.isArray(item.embedding) || !item.embedding.every((x) => typeof x === "number")) {
          throw remoteError(url, "answered an embedding that is not an array of numbers");
        }
        const vector = Float32Array.from(item.embedding as number[]);
        return options.normalize ? normalized(vector) : vector;
      });
    }, options.signal);
  }
}

function normalized(vector: Float32Array): Float32Array {
  let norm = 0;
  for (const x of vector) norm += x * x;
  norm = Math.sqrt(norm);
  return norm > 0 ? vector.map((x) => x / norm) : vector;
}
