/**
 * Downloaded model files kept across page loads in the Origin Private File System, where the
 * runtime has one (browsers; not Node). An entry is a data file and, written only after the data
 * is complete, a small JSON record naming its URL and size: a download cut off (a tab closed
 * mid-way) leaves data without a record, which is never served and is removed on the next listing.
 */
import type { ModelBlob } from "@infer/core";

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
  bytes: number;
  /** When the download completed (ISO 8601). */
  storedAt: string;
}

const FOLDER = "infer-models";
const RECORD = ".json";
/** Bytes written at a time: the kernels' memory is shared, and writes take copies of plain arrays. */
const WRITE_BYTES = 16 * 2 ** 20;

const web = globalThis as unknown as StorageGlobals;

async function folder(): Promise<DirectoryHandle | undefined> {
  try {
    return await web.navigator?.storage?.getDirectory?.().then((root) => root.getDirectoryHandle(FOLDER, { create: true }));
  } catch {
    return undefined; // no OPFS here, or storage refused (private mode): run without a cache
  }
}

/** The entry's file name: a hash of the URL (URLs are longer than file names may be). */
async function keyOf(url: string): Promise<string> {
  const digest = await web.crypto!.subtle!.digest("SHA-256", new TextEncoder().encode(url));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function readRecord(dir: DirectoryHandle, key: string): Promise<CachedModel | undefined> {
  try {
    const record = JSON.parse(await (await (await dir.getFileHandle(key + RECORD)).getFile()).text()) as CachedModel;
    const data = await (await dir.getFileHandle(key)).getFile();
    return data.size === record.bytes ? record : undefined;
  } catch {
    return undefined;
  }
}

/** Whether this runtime can cache models (an OPFS and WebCrypto). */
export async function cacheAvailable(): Promise<boolean> {
  return web.crypto?.subtle !== undefined && (await folder()) !== undefined;
}

/** The complete cached copy of url, as a Blob to read from, or undefined. */
export async function cachedModel(url: string): Promise<ModelBlob | undefined> {
  const dir = await folder();
  if (!dir || !web.crypto?.subtle) return undefined;
  const key = await keyOf(url);
  if (!(await readRecord(dir, key))) return undefined;
  return (await dir.getFileHandle(key)).getFile();
}

/** Stores bytes as url's cached copy; failures (a full quota) leave no entry and are not errors. */
export async function storeModel(url: string, bytes: Uint8Array): Promise<boolean> {
  const dir = await folder();
  if (!dir || !web.crypto?.subtle) return false;
  const key = await keyOf(url);
  let writable: Writable | undefined;
  try {
    await dir.removeEntry(key + RECORD).catch(() => undefined);
    writable = await (await dir.getFileHandle(key, { create: true })).createWritable();
    for (let at = 0; at < bytes.byteLength; at += WRITE_BYTES) await writable.write(bytes.slice(at, at + WRITE_BYTES));
    await writable.close();
    writable = undefined;
    const record: CachedModel = { url, bytes: bytes.byteLength, storedAt: new Date().toISOString() };
    const recordWritable = await (await dir.getFileHandle(key + RECORD, { create: true })).createWritable();
    await recordWritable.write(new TextEncoder().encode(JSON.stringify(record)));
    await recordWritable.close();
    return true;
  } catch {
    await writable?.abort().catch(() => undefined);
    await dir.removeEntry(key).catch(() => undefined);
    return false;
  }
}

/** The complete cached models; data left by a cut-off download is removed on the way. */
export async function listCachedModels(): Promise<CachedModel[]> {
  const dir = await folder();
  if (!dir) return [];
  const names: string[] = [];
  for await (const name of dir.keys()) names.push(name);
  const models: CachedModel[] = [];
  for (const name of names.filter((n) => !n.endsWith(RECORD))) {
    const record = await readRecord(dir, name);
    if (record) models.push(record);
    else {
      await dir.removeEntry(name).catch(() => undefined);
      await dir.removeEntry(name + RECORD).catch(() => undefined);
    }
  }
  return models.sort((a, b) => a.url.localeCompare(b.url));
}

/** Removes url's cached copy; false when there was none. */
export async function deleteCachedModel(url: string): Promise<boolean> {
  const dir = await folder();
  if (!dir || !web.crypto?.subtle) return false;
  const key = await keyOf(url);
  const had = (await readRecord(dir, key)) !== undefined;
  await dir.removeEntry(key + RECORD).catch(() => undefined);
  await dir.removeEntry(key).catch(() => undefined);
  return had;
}
