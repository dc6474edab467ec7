/**
 * A model folder (config.json, tokenizer.json, *.safetensors) read file by file, wherever it is:
 * on disk (a path) or behind a URL (fetch).
 */
import { InferenceError, isInferenceError } from "@infer/core";
import {
  SAFETENSORS_INDEX,
  missingShard,
  outsideFolder,
  parseSafetensors,
  parseSafetensorsIndex,
  readSafetensorsShards,
  type SafetensorsModel,
} from "@infer/formats";
import { platform } from "#platform";
import type { BufferAllocator } from "../platform/types.js";
import { blobSource, urlSource } from "./byte-source.js";
import { cacheAvailable, cachedFolder, storeFolder } from "./cache.js";
import { remoteSize, request, type ProgressListener } from "./download.js";

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
        if (isInferenceError(error)) throw error;
        const code = (error as { code?: string }).code;
        throw new InferenceError("MODEL_FORMAT", `${path}: cannot read the file (${code ?? String(error)})`, {
          cause: error,
          details: { file: path },
        });
      }
    },
  };
}

/** The text files loading a folder model reads (load-hf.ts, tokenizer/load.ts): what a cached folder keeps besides its weights. */
const TEXT_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja"];
const SINGLE = "model.safetensors";

export interface UrlFolderOptions {
  onProgress?: ProgressListener;
  signal?: AbortSignal;
  /** Keep the folder in the browser's OPFS and read it from there next time (default true; no effect without OPFS). */
  cache?: boolean;
}

/**
 * A folder behind an http(s) URL (with or without its trailing slash): files are fetched by name,
 * a sharded model's shards one after another (each resumed on its own, progress over them all).
 * With the cache, a folder loaded before is read from OPFS, and one downloaded whole is stored.
 */
export function urlFolder(url: string, options: UrlFolderOptions = {}): ModelFolder {
  const base = url.endsWith("/") ? url : `${url}/`;
  const { onProgress, signal } = options;
  const pathOf = (name: string) => new URL(name, base).href;
  const useCache = options.cache !== false;
  const stored = useCache ? cachedFolder(base).catch(() => undefined) : Promise.resolve(undefined);
  /** The text files this load read (undefined: absent), kept to store the folder once its weights are in. */
  const texts = new Map<string, string | undefined>();

  const fetchText = async (name: string): Promise<string | undefined> => {
    const cached = await stored;
    if (cached?.absent.has(name)) return undefined;
    const blob = cached?.files.get(name);
    if (blob) return new TextDecoder().decode(await blob.arrayBuffer());
    try {
      return await (await request(pathOf(name), signal)).text();
    } catch (error) {
      if (isInferenceError(error, "MODEL_NOT_FOUND")) return undefined;
      throw error;
    }
  };
  const readText = async (name: string): Promise<string | undefined> => {
    if (!texts.has(name)) texts.set(name, await fetchText(name));
    return texts.get(name);
  };
  /** Whether the folder has the file, and its size when known (from the cache, or a HEAD request). */
  const find = async (name: string): Promise<{ found: boolean; size?: number }> => {
    const cached = await stored;
    if (cached) return { found: cached.files.has(name), size: cached.files.get(name)?.size };
    return remoteSize(pathOf(name), signal).then(
      (size) => ({ found: true, size }),
      (error: unknown) => {
        if (isInferenceError(error, "MODEL_NOT_FOUND")) return { found: false };
        // A server that refuses HEAD still serves the file: its size is learnt when it is read.
        if (isInferenceError(error, "IO") && error.details["status"] !== undefined) return { found: true };
        throw error;
      },
    );
  };

  /** The files' bytes in order, read from the cache or downloaded, with progress over their total. */
  const readFiles = async (names: string[], sizes: (number | undefined)[], allocate: BufferAllocator | undefined): Promise<Uint8Array[]> => {
    const cached = await stored;
    const total = sizes.every((size) => size !== undefined) ? sizes.reduce<number>((a, b) => a + b!, 0) : undefined;
    const files: Uint8Array[] = [];
    let before = 0;
    for (const name of names) {
      const offset = before;
      const progress: ProgressListener | undefined =
        onProgress && ((p) => onProgress({ phase: p.phase, loadedBytes: offset + p.loadedBytes, totalBytes: names.length === 1 ? p.totalBytes : total }));
      const blob = cached?.files.get(name);
      const source = blob ? await blobSource(blob, progress, pathOf(name)) : await urlSource(pathOf(name), progress, signal);
      files.push(await source.readAll(allocate));
      before += source.size;
    }
    return files;
  };

  /** Stores a folder read whole from the network, with the text files loading it goes on to read. */
  const store = async (weights: { name: string; bytes: Uint8Array }[]): Promise<void> => {
    if (!useCache || (await stored) || !(await cacheAvailable())) return;
    for (const name of TEXT_FILES) await readText(name);
    const encoder = new TextEncoder();
    const files = [...texts].flatMap(([name, text]) => (text === undefined ? [] : [{ name, bytes: encoder.encode(text) }]));
    const absent = [...texts].flatMap(([name, text]) => (text === undefined ? [name] : []));
    await storeFolder(base, [...files, ...weights], absent);
  };

  return {
    label: base,
    pathOf,
    readText,
    async readSafetensors(allocate) {
      const single = await find(SINGLE);
      if (single.found) {
        const file = pathOf(SINGLE);
        const [bytes] = await readFiles([SINGLE], [single.size], allocate);
        const parsed = parseSafetensors(bytes!, file);
        await store([{ name: SINGLE, bytes: bytes! }]);
        return { tensors: parsed.tensors, metadata: parsed.metadata, files: [file] };
      }
      const indexPath = pathOf(SAFETENSORS_INDEX);
      const indexText = await readText(SAFETENSORS_INDEX);
      if (indexText === undefined) {
        throw new InferenceError("MODEL_NOT_FOUND", `${base}: no ${SINGLE} or ${SAFETENSORS_INDEX}`, { details: { file: pathOf(SINGLE) } });
      }
      const index = parseSafetensorsIndex(indexText, indexPath);
      const sizes: (number | undefined)[] = [];
      for (const shard of index.shards) {
        // A name that resolves outside the folder (an encoded "..", say) is refused like a literal one.
        if (!pathOf(shard).startsWith(base)) throw outsideFolder(indexPath, shard);
        // Every shard is looked for before any is downloaded: a missing one fails at once.
        const found = await find(shard);
        if (!found.found) throw missingShard(indexPath, shard, pathOf(shard));
        sizes.push(found.size);
      }
      const bytes = await readFiles(index.shards, sizes, allocate);
      const byShard = new Map(index.shards.map((shard, i) => [shard, bytes[i]!]));
      const model = await readSafetensorsShards(indexPath, index, async (shard) => parseSafetensors(byShard.get(shard)!, pathOf(shard)));
      await store(index.shards.map((name) => ({ name, bytes: byShard.get(name)! })));
      return model;
    },
  };
}
