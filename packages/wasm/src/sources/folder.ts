/**
 * A model folder (config.json, tokenizer.json, *.safetensors) read file by file, wherever it is:
 * on disk (a path) or behind a URL (fetch).
 */
import { InferenceError, isInferenceError } from "@infer/core";
import { parseSafetensors, type SafetensorsModel } from "@infer/formats";
import { platform } from "#platform";
import type { BufferAllocator } from "../platform/types.js";
import { urlSource } from "./byte-source.js";
import { request, type ProgressListener } from "./download.js";

export interface ModelFolder {
  /** The folder, for messages (a path or a URL). */
  readonly label: string;
  /** A file's full name, for messages and error details. */
  pathOf(name: string): string;
  /** A text file's contents, undefined when the folder has no such file. */
  readText(name: string): Promise<string | undefined>;
  /** The folder's safetensors weights, read into `allocate`'s memory. */
  readSafetensors(allocate?: BufferAllocator): Promise<SafetensorsModel>;
}

/** A folder on disk: a file that exists but cannot be read is MODEL_FORMAT naming it. */
export function pathFolder(folder: string): ModelFolder {
  const pathOf = (name: string) => platform.files.join(folder, name);
  return {
    label: folder,
    pathOf,
    readSafetensors: (allocate) => platform.files.readSafetensorsModel(folder, allocate),
    async readText(name) {
      const path = pathOf(name);
      if ((await platform.files.stat(path)) === undefined) return undefined;
      try {
        return await platform.files.readText(path);
      } catch (error) {
        const code = (error as { code?: string }).code;
        throw new InferenceError("MODEL_FORMAT", `${path}: cannot read the file (${code ?? String(error)})`, {
          cause: error,
          details: { file: path },
        });
      }
    },
  };
}

/** A folder behind an http(s) URL (with or without its trailing slash): files are fetched by name. */
export function urlFolder(url: string, options: { onProgress?: ProgressListener; signal?: AbortSignal } = {}): ModelFolder {
  const base = url.endsWith("/") ? url : `${url}/`;
  const pathOf = (name: string) => new URL(name, base).href;
  return {
    label: base,
    pathOf,
    async readText(name) {
      try {
        return await (await request(pathOf(name), options.signal)).text();
      } catch (error) {
        if (isInferenceError(error, "MODEL_NOT_FOUND")) return undefined;
        throw error;
      }
    },
    async readSafetensors(allocate) {
      const file = pathOf("model.safetensors");
      let source;
      try {
        source = await urlSource(file, options.onProgress, options.signal);
      } catch (error) {
        if (!isInferenceError(error, "MODEL_NOT_FOUND")) throw error;
        const sharded = (await this.readText("model.safetensors.index.json")) !== undefined;
        throw new InferenceError(
          sharded ? "UNSUPPORTED" : "MODEL_NOT_FOUND",
          sharded
            ? `${base}: sharded safetensors (model.safetensors.index.json) load from a path only, not yet from a URL`
            : `${base}: no model.safetensors`,
          { cause: error, details: { file } },
        );
      }
      const parsed = parseSafetensors(await source.readAll(allocate), file);
      return { tensors: parsed.tensors, metadata: parsed.metadata, files: [file] };
    },
  };
}
