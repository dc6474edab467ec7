/**
 * Downloaded models kept across page loads in the Origin Private File System, where the runtime
 * has one (browsers; not Node). An entry is the model's data files and, written only after all of
 * them are complete, a small JSON record naming its URL, files and sizes: a download cut off (a tab
 * closed mid-way) leaves data without a record, which is never served and is removed on the next
 * listing.
 *
 * One entry per URL the user gave: a GGUF file's URL, or a model folder's URL with all the folder's
 * files in it (config, tokenizer, index, shards). The model is the unit people load, list and
 * delete, so a folder lists once with its total size, `deleteCachedModel(folderUrl)` removes every
 * file of it, and a folder is served whole from one download or not at all (entries per file could
 * mix files of two versions of a model, or keep a tokenizer whose weights were evicted).
 */
import type { ModelBlob } from "@infer/core";
import { folderUrlOf } from "./model-url.js";

/** The few OPFS interfaces used (the package compiles without lib "dom"). */
interface Writable {
  write(data: Uint8Array): Promise<void>;
  close(): Promise<void>;
  abort(): Promise<void>;
}
interface FileHandle {
  getFile(): Promise<ModelBlob & { text(): Promise<string> }>;
  createWritable(): Promise<Writable>;
}
interface DirectoryHandle {
  getDirectoryHandle(name: string, options?: { create: boolean }): Promise<DirectoryHandle>;
  getFileHandle(name: string, options?: { create: boolean }): Promise<FileHandle>;
  removeEntry(name: string): Promise<void>;
  keys(): AsyncIterable<string>;
}
interface StorageGlobals {
  navigator?: { storage?: { getDirectory?(): Promise<DirectoryHandle> } };
  crypto?: { subtle?: { digest(algorithm: string, data: Uint8Array): Promise<ArrayBuffer> } };
}

export interface CachedModel {
  url: string;
  /** All its files together. */
  bytes: number;
  /** When the download completed (ISO 8601). */
  storedAt: string;
  /** A model folder's files by name (absent for a single file). */
  files?: { name: string; bytes: number }[];
}

/** The JSON record beside the data: a folder's record also names the files it does not have. */
interface CacheRecord extends CachedModel {
  /** Files the folder was asked for and does not have (so a cached folder asks no server for them). */
  absent?: string[];
}

/** A cached model folder: its files as Blobs by name, and the names it does not have. */
export interface CachedFolder {
  files: ReadonlyMap<string, ModelBlob>;
  absent: ReadonlySet<string>;
}

const FOLDER = "infer-models";
const RECORD = ".json";
/** Bytes written at a time: the kernels' memory is shared, and writes take copies of plain arrays. */
const WRITE_BYTES = 16 * 2 ** 20;
/** An entry's names start with the URL's SHA-256 in hex. */
const KEY = /^[0-9a-f]{64}/;

const web = globalThis as unknown as StorageGlobals;

async function folder(): Promise<DirectoryHandle | undefined> {
  if (!web.crypto?.subtle) return undefined;
  try {
    return await web.navigator?.storage?.getDirectory?.().then((root) => root.getDirectoryHandle(FOLDER, { create: true }));
  } catch {
    return undefined; // no OPFS here, or storage refused (private mode): run without a cache
  }
}

/** The entry's name: a hash of the URL (URLs are longer than file names may be). */
async function keyOf(url: string): Promise<string> {
  const digest = await web.crypto!.subtle!.digest("SHA-256", new TextEncoder().encode(url));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The data files' names: a single file's is the key, a folder's file i is key-i. */
function dataNames(key: string, record: CachedModel): string[] {
  return record.files ? record.files.map((_, i) => `${key}-${i}`) : [key];
}

async function readRecord(dir: DirectoryHandle, key: string): Promise<{ record: CacheRecord; data: ModelBlob[] } | undefined> {
  try {
    const record = JSON.parse(await (await (await dir.getFileHandle(key + RECORD)).getFile()).text()) as CacheRecord;
    const sizes = record.files ? record.files.map((file) => file.bytes) : [record.bytes];
    const data: ModelBlob[] = [];
    for (const name of dataNames(key, record)) data.push(await (await dir.getFileHandle(name)).getFile());
    return data.every((blob, i) => blob.size === sizes[i]) ? { record, data } : undefined;
  } catch {
    return undefined;
  }
}

/** Removes every name of the entry, its record first (so a half-removed entry is never served). */
async function removeEntry(dir: DirectoryHandle, key: string): Promise<void> {
  await dir.removeEntry(key + RECORD).catch(() => undefined);
  const names: string[] = [];
  for await (const name of dir.keys()) if (name.startsWith(key)) names.push(name);
  for (const name of names) await dir.removeEntry(name).catch(() => undefined);
}

/** Whether this runtime can cache models (an OPFS and WebCrypto). */
export async function cacheAvailable(): Promise<boolean> {
  return (await folder()) !== undefined;
}

/** The complete cached copy of a single file's url, as a Blob to read from, or undefined. */
export async function cachedModel(url: string): Promise<ModelBlob | undefined> {
  const dir = await folder();
  const entry = dir && (await readRecord(dir, await keyOf(url)));
  return entry && !entry.record.files ? entry.data[0] : undefined;
}

/** The complete cached copy of a model folder's url, or undefined. */
export async function cachedFolder(url: string): Promise<CachedFolder | undefined> {
  const dir = await folder();
  const entry = dir && (await readRecord(dir, await keyOf(url)));
  if (!entry?.record.files) return undefined;
  const files = new Map(entry.record.files.map((file, i) => [file.name, entry.data[i]!]));
  return { files, absent: new Set(entry.record.absent ?? []) };
}

/** Stores bytes as a single file url's cached copy; failures (a full quota) leave no entry and are not errors. */
export async function storeModel(url: string, bytes: Uint8Array): Promise<boolean> {
  return store(url, [bytes], (total) => ({ url, bytes: total, storedAt: new Date().toISOString() }));
}

/** Stores a model folder's files (and the names it lacks) as url's cached copy; like storeModel. */
export async function storeFolder(url: string, files: { name: string; bytes: Uint8Array }[], absent: string[]): Promise<boolean> {
  const listed = files.map((file) => ({ name: file.name, bytes: file.bytes.byteLength }));
  return store(url, files.map((file) => file.bytes), (total) => ({ url, bytes: total, storedAt: new Date().toISOString(), files: listed, absent }));
}

async function store(url: string, contents: Uint8Array[], recordOf: (total: number) => CacheRecord): Promise<boolean> {
  const dir = await folder();
  if (!dir) return false;
  const key = await keyOf(url);
  const record = recordOf(contents.reduce((sum, bytes) => sum + bytes.byteLength, 0));
  let writable: Writable | undefined;
  try {
    await removeEntry(dir, key);
    const names = dataNames(key, record);
    for (const [i, bytes] of contents.entries()) {
      writable = await (await dir.getFileHandle(names[i]!, { create: true })).createWritable();
      for (let at = 0; at < bytes.byteLength; at += WRITE_BYTES) await writable.write(bytes.slice(at, at + WRITE_BYTES));
      await writable.close();
      writable = undefined;
    }
    const recordWritable = await (await dir.getFileHandle(key + RECORD, { create: true })).createWritable();
    await recordWritable.write(new TextEncoder().encode(JSON.stringify(record)));
    await recordWritable.close();
    return true;
  } catch {
    await writable?.abort().catch(() => undefined);
    await removeEntry(dir, key);
    return false;
  }
}

/** The complete cached models; data left by a cut-off download is removed on the way. */
export async function listCachedModels(): Promise<CachedModel[]> {
  const dir = await folder();
  if (!dir) return [];
  const keys = new Set<string>();
  for await (const name of dir.keys()) {
    const key = KEY.exec(name)?.[0];
    if (key) keys.add(key);
  }
  const models: CachedModel[] = [];
  for (const key of keys) {
    const entry = await readRecord(dir, key);
    if (!entry) await removeEntry(dir, key);
    else {
      const { url, bytes, storedAt, files } = entry.record;
      models.push(files ? { url, bytes, storedAt, files } : { url, bytes, storedAt });
    }
  }
  return models.sort((a, b) => a.url.localeCompare(b.url));
}

/** Removes url's cached copy (all of a folder's files, by any URL that loads the folder); false when there was none. */
export async function deleteCachedModel(url: string): Promise<boolean> {
  const dir = await folder();
  if (!dir) return false;
  const key = await keyOf(folderUrlOf(url) ?? url);
  const had = (await readRecord(dir, key)) !== undefined;
  await removeEntry(dir, key);
  return had;
}
