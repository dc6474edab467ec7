import { InferenceError, toInferenceError } from "./errors.js";
import type { TextModel } from "./model.js";
import type { LoadOptions } from "./options.js";
import { loadModel } from "./registry.js";
import type { ModelSource } from "./source.js";

/** How the service gets one model: a source for `loadModel`, or a loader of its own (e.g. a set of replicas). */
export type ServiceEntry =
  | ModelSource
  | {
      source?: ModelSource;
      options?: LoadOptions;
      /** Memory this model holds once loaded; when absent, measured after the load (see `modelBytes`). */
      bytes?: number;
      /** Loads the model instead of `loadModel(source, options)`. */
      load?: () => Promise<TextModel>;
    };

export interface ServiceOptions {
  /** The models, by the name callers ask for. */
  models: Record<string, ServiceEntry>;
  /** Backend pinned for entries whose options pin none. */
  defaultBackend?: string;
  /** The most bytes loaded at once: idle least-recently-used models are unloaded to stay under it (default: no limit). */
  maxLoadedBytes?: number;
  /** Unload a model this long after its last use ends (default: never). */
  idleUnloadMs?: number;
}

export type ModelState = "unloaded" | "loading" | "loaded";

export interface ModelStatus {
  name: string;
  state: ModelState;
  /** Memory held (0 when unloaded or unknown). */
  bytes: number;
  /** Calls holding the model now; a model in use is never unloaded. */
  inUse: number;
  /** When the last use began or ended (ms since the epoch), undefined before the first. */
  lastUsedAt?: number;
  /** Why the last load failed; cleared by the next successful one. */
  error?: { code: string; message: string };
}

/** A model held for one call; `release()` (idempotent) lets the service unload it again. */
export interface ModelLease {
  readonly model: TextModel;
  release(): void;
}

export interface ModelService {
  readonly names: readonly string[];
  /** The model `name`, loaded now unless it is already (concurrent callers share one load); held until `release()`. */
  acquire(name: string): Promise<ModelLease>;
  /** `fn` with the model held for its duration. */
  use<T>(name: string, fn: (model: TextModel) => Promise<T>): Promise<T>;
  /** Unloads `name` now unless it is in use; resolves with whether it did. */
  unload(name: string): Promise<boolean>;
  status(): ModelStatus[];
  /** Unloads everything; later calls fail with `CLOSED`. */
  close(): Promise<void>;
}

interface Slot {
  readonly name: string;
  readonly entry: Exclude<ServiceEntry, ModelSource> & { source?: ModelSource };
  model?: TextModel;
  loading?: Promise<TextModel>;
  bytes: number;
  inUse: number;
  lastUsedAt?: number;
  /** Order of the last use: clock times tie within a millisecond, this never does. */
  lastUse: number;
  error?: InferenceError;
  idleTimer?: ReturnType<typeof setTimeout>;
}

/**
 * Memory a loaded model holds: what its backend reports, else its weights
 * estimated from the parameter count and bits per weight, else 0 (unknown
 * sizes never force other models out).
 */
export function modelBytes(model: TextModel): number {
  const active = model.metrics().activeMemoryBytes;
  if (active > 0) return active;
  const info = model.info();
  return info.parameters !== undefined ? Math.ceil((info.parameters * info.quantBits) / 8) : 0;
}

/** A model service: several models in one process, loaded on first use, unloaded when idle or to fit a memory budget. */
export function createService(options: ServiceOptions): ModelService {
  const names = Object.keys(options.models);
  if (names.length === 0) throw new InferenceError("INVALID_OPTION", "createService needs at least one model in `models`", { details: { option: "models" } });
  for (const [field, value] of [["maxLoadedBytes", options.maxLoadedBytes], ["idleUnloadMs", options.idleUnloadMs]] as const) {
    if (value !== undefined && !(Number.isFinite(value) && value >= 0)) {
      throw new InferenceError("INVALID_OPTION", `${field} must be a non-negative number, got ${String(value)}`, { details: { option: field } });
    }
  }
  const slots = new Map<string, Slot>(names.map((name) => [name, { name, entry: entryOf(options.models[name]!), bytes: 0, inUse: 0, lastUse: 0 }]));
  let closed = false;
  let uses = 0;

  function slotOf(name: string): Slot {
    if (closed) throw new InferenceError("CLOSED", "the model service is closed");
    const slot = slots.get(name);
    if (!slot) {
      throw new InferenceError("MODEL_NOT_FOUND", `no model named '${name}' in this service (known: ${names.join(", ")})`, { details: { model: name } });
    }
    return slot;
  }

  async function load(slot: Slot): Promise<TextModel> {
    const { entry } = slot;
    // A declared size frees room before the load, so the old and the new model never share memory.
    if (entry.bytes !== undefined) await fit(entry.bytes, slot);
    const model = entry.load
      ? await entry.load()
      : await loadModel(entry.source!, { ...entry.options, backend: entry.options?.backend ?? options.defaultBackend });
    slot.bytes = entry.bytes ?? modelBytes(model);
    return model;
  }

  /** Unloads idle models, least recently used first, until `extra` more bytes fit the budget. */
  async function fit(extra: number, keep: Slot): Promise<void> {
    const budget = options.maxLoadedBytes;
    if (budget === undefined) return;
    const loaded = () => [...slots.values()].filter((s) => s.model !== undefined);
    const total = () => loaded().reduce((sum, s) => sum + s.bytes, 0);
    const idle = loaded()
      .filter((s) => s !== keep && s.inUse === 0)
      .sort((a, b) => a.lastUse - b.lastUse);
    for (const slot of idle) {
      if (total() + extra <= budget) return;
      await unloadSlot(slot);
    }
  }

  async function unloadSlot(slot: Slot): Promise<boolean> {
    if (!slot.model || slot.inUse > 0) return false;
    clearTimeout(slot.idleTimer);
    const { model } = slot;
    slot.model = undefined;
    slot.bytes = 0;
    await model.close();
    return true;
  }

  function release(slot: Slot): void {
    slot.inUse--;
    slot.lastUsedAt = Date.now();
    slot.lastUse = ++uses;
    if (slot.inUse > 0 || options.idleUnloadMs === undefined) return;
    const timer = setTimeout(() => void unloadSlot(slot).catch(() => undefined), options.idleUnloadMs);
    // An idle timer alone should not keep a process (a CLI run, a test) alive.
    (timer as { unref?: () => void }).unref?.();
    slot.idleTimer = timer;
  }

  async function acquire(name: string): Promise<ModelLease> {
    const slot = slotOf(name);
    // Counted before the load so that nothing unloads it in between.
    slot.inUse++;
    slot.lastUsedAt = Date.now();
    slot.lastUse = ++uses;
    clearTimeout(slot.idleTimer);
    try {
      if (!slot.model) {
        slot.loading ??= load(slot).then(
          (model) => {
            slot.model = model;
            slot.error = undefined;
            slot.loading = undefined;
            return model;
          },
          (error: unknown) => {
            slot.error = toInferenceError(error);
            slot.loading = undefined;
            throw slot.error;
          },
        );
        await slot.loading;
        if (closed) throw new InferenceError("CLOSED", "the model service closed while the model loaded");
        await fit(0, slot);
      }
    } catch (error) {
      release(slot);
      throw error;
    }
    const model = slot.model!;
    let released = false;
    return {
      model,
      release: () => {
        if (released) return;
        released = true;
        release(slot);
        // A model released over the budget (others were in use when it loaded) may now make room.
        void fit(0, slot).catch(() => undefined);
      },
    };
  }

  return {
    names,
    acquire,
    async use(name, fn) {
      const lease = await acquire(name);
      try {
        return await fn(lease.model);
      } finally {
        lease.release();
      }
    },
    unload: async (name) => unloadSlot(slotOf(name)),
    status: () =>
      [...slots.values()].map((slot) => ({
        name: slot.name,
        state: slot.model ? "loaded" : slot.loading ? "loading" : "unloaded",
        bytes: slot.bytes,
        inUse: slot.inUse,
        lastUsedAt: slot.lastUsedAt,
        error: slot.error && { code: slot.error.code, message: slot.error.message },
      })),
    async close() {
      if (closed) return;
      closed = true;
      const open = [...slots.values()].map(async (slot) => {
        clearTimeout(slot.idleTimer);
        const model = slot.model ?? (await slot.loading?.catch(() => undefined));
        slot.model = undefined;
        slot.bytes = 0;
        await model?.close();
      });
      await Promise.all(open);
    },
  };
}

function entryOf(entry: ServiceEntry): Slot["entry"] {
  const isSpec = typeof entry === "object" && entry !== null && !(entry instanceof URL) && !ArrayBuffer.isView(entry) && !isBlob(entry) && !(entry instanceof ArrayBuffer);
  const spec = isSpec ? (entry as Slot["entry"]) : { source: entry as ModelSource };
  if (spec.source === undefined && spec.load === undefined) {
    throw new InferenceError("INVALID_OPTION", "a service entry needs a `source` or a `load` function", { details: { option: "models" } });
  }
  return spec;
}

function isBlob(value: object): boolean {
  return typeof Blob !== "undefined" && value instanceof Blob;
}
