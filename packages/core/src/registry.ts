import type { CapabilityStatus, CapabilityId } from "./capabilities.js";
import { InferenceError, toInferenceError } from "./errors.js";
import type { TextModel } from "./model.js";
import { type LoadOptions, validateLoadOptions } from "./options.js";
import { describeSource, type ModelSource, sourceKind, sourcePath } from "./source.js";
import type { ModelFormat } from "./types.js";

/** A backend: one way of running models, registered by importing its package. */
export interface Backend {
  readonly name: string;
  /** True when this backend can run here (its binary loads, its device exists). */
  available(): Promise<boolean> | boolean;
  /** Why `available()` is false, for `BACKEND_UNAVAILABLE` messages. */
  unavailableReason?(): Promise<string> | string;
  /** Whether this backend reads the model at `path` (format sniffing, no full load). */
  canLoad(path: string): Promise<boolean>;
  loadModel(path: string, options?: LoadOptions): Promise<TextModel>;
  /** Loads from an http(s) URL, a Blob or bytes (see ModelSource); backends without it take paths only. */
  loadSource?(source: ModelSource, options?: LoadOptions): Promise<TextModel>;
  /**
   * The name of another backend measured to run this file faster on this
   * machine, or undefined. `loadModel` without a pinned backend then tries
   * that one first and comes back to this one if it is missing, unavailable,
   * cannot read the file or fails to load it.
   */
  fasterBackendFor?(path: string, options: LoadOptions): Promise<string | undefined>;
  /** What this backend's models can do; see `capabilitiesOf`. */
  readonly capabilities?: Partial<Record<CapabilityId, CapabilityStatus>>;
}

/**
 * Environment services the contract needs but cannot implement portably (it
 * has no file system). `@infer/core/node` installs the Node host on import.
 */
export interface Host {
  exists(path: string): Promise<boolean>;
  detectFormat(path: string): Promise<ModelFormat>;
}

/** Backends in the order `defaultBackend` and `loadModel` prefer them. */
export const BACKEND_PREFERENCE = ["metal", "cuda", "rocm", "llama_cpp", "wasm"] as const;

const backends = new Map<string, Backend>();
let host: Host | undefined;

/** Adds a backend; registering a name again replaces the earlier one (last wins). */
export function register(backend: Backend): void {
  if (!backend || typeof backend.name !== "string" || backend.name.length === 0) {
    throw new InferenceError("INVALID_OPTION", "register() needs a backend with a non-empty name");
  }
  backends.set(backend.name, backend);
}

/** Removes a backend (tests, plugins that unload). */
export function unregister(name: string): boolean {
  return backends.delete(name);
}

export function getBackend(name: string): Backend {
  const backend = backends.get(name);
  if (!backend) {
    const known = listBackends();
    throw new InferenceError(
      "BACKEND_NOT_FOUND",
      `no backend named '${name}' is registered (registered: ${known.length ? known.join(", ") : "none"}; import a backend package such as "@infer/wasm" to register one)`,
      { details: { backend: name, registered: known } },
    );
  }
  return backend;
}

export function listBackends(): string[] {
  return [...backends.keys()].sort();
}

export function setHost(next: Host | undefined): void {
  host = next;
}

export function getHost(): Host | undefined {
  return host;
}

/** Registered backends in preference order: the known names first, then the rest alphabetically. */
function preferenceOrder(): Backend[] {
  const rank = (name: string) => {
    const at = (BACKEND_PREFERENCE as readonly string[]).indexOf(name);
    return at < 0 ? BACKEND_PREFERENCE.length : at;
  };
  return [...backends.values()].sort((a, b) => rank(a.name) - rank(b.name) || a.name.localeCompare(b.name));
}

async function isAvailable(backend: Backend): Promise<boolean> {
  try {
    return await backend.available();
  } catch {
    return false;
  }
}

/** The most preferred available backend, or undefined when none is. */
export async function defaultBackend(): Promise<Backend | undefined> {
  for (const backend of preferenceOrder()) if (await isAvailable(backend)) return backend;
  return undefined;
}

/**
 * Loads a model: with the pinned `options.backend`, or with the first available
 * backend in preference order that can read this format (or the faster backend
 * it names for this file, see `Backend.fasterBackendFor`). A URL, Blob or bytes
 * go to a backend with `loadSource` (the pinned one must have it).
 */
export async function loadModel(source: ModelSource, options: LoadOptions = {}): Promise<TextModel> {
  if (typeof source === "string" && source.length === 0) {
    throw new InferenceError("INVALID_OPTION", "model path must be a non-empty string");
  }
  const kind = sourceKind(source);
  validateLoadOptions(options);
  if (kind !== "path") return loadFromSource(source, options);
  const path = sourcePath(source as string | URL);
  if (host && !(await host.exists(path))) {
    throw new InferenceError("MODEL_NOT_FOUND", `no model at '${path}'`, { details: { path } });
  }
  if (options.backend !== undefined) {
    const backend = getBackend(options.backend);
    if (!(await isAvailable(backend))) throw await unavailable(backend);
    return loadWith(backend, path, options);
  }
  const candidates = preferenceOrder();
  for (const backend of candidates) {
    // Format sniffing is cheap; availability may load a native library, so it is asked second.
    if (!(await backend.canLoad(path).catch(() => false))) continue;
    if (await isAvailable(backend)) return (await loadWithFaster(backend, path, options)) ?? loadWith(backend, path, options);
  }
  const format = host ? await host.detectFormat(path) : "unknown";
  throw new InferenceError(
    "NO_BACKEND_FOR_FORMAT",
    `no available backend can load '${path}' (detected format: ${format}; registered backends: ${
      candidates.map((b) => b.name).join(", ") || "none"
    })`,
    { details: { path, format } },
  );
}

/** A URL, Blob or bytes: the pinned backend, or the first available one that loads such sources. */
async function loadFromSource(source: ModelSource, options: LoadOptions): Promise<TextModel> {
  const what = describeSource(source);
  if (options.backend !== undefined) {
    const backend = getBackend(options.backend);
    if (!backend.loadSource) {
      throw new InferenceError("UNSUPPORTED", `backend '${backend.name}' loads models from file paths only, not from ${what}`, {
        details: { backend: backend.name, source: sourceKind(source) },
      });
    }
    if (!(await isAvailable(backend))) throw await unavailable(backend);
    return loadWith(backend, source, options);
  }
  const candidates = preferenceOrder();
  for (const backend of candidates) if (backend.loadSource && (await isAvailable(backend))) return loadWith(backend, source, options);
  throw new InferenceError(
    "NO_BACKEND_FOR_FORMAT",
    `no available backend loads a model from ${what} (registered backends: ${candidates.map((b) => b.name).join(", ") || "none"}; ` +
      `"@infer/wasm" loads URLs, Blobs and bytes)`,
    { details: { source: sourceKind(source) } },
  );
}

/**
 * Loads with the backend `chosen` names as faster for this file, when there is
 * one that can; undefined sends the caller back to `chosen`, which reads the
 * file and whose errors (not the faster one's) the caller then sees.
 */
async function loadWithFaster(chosen: Backend, path: string, options: LoadOptions): Promise<TextModel | undefined> {
  // Its errors pass: it reads only settings (an environment variable it refuses) and the file's header.
  const name = await chosen.fasterBackendFor?.(path, options);
  const faster = name === undefined || name === chosen.name ? undefined : backends.get(name);
  if (!faster || !(await faster.canLoad(path).catch(() => false)) || !(await isAvailable(faster))) return undefined;
  try {
    return await faster.loadModel(path, options);
  } catch {
    return undefined;
  }
}

/** A backend's own InferenceErrors pass unchanged; anything else it throws becomes INTERNAL with context. */
async function loadWith(backend: Backend, source: ModelSource, options: LoadOptions): Promise<TextModel> {
  try {
    return await (typeof source === "string" && sourceKind(source) === "path" ? backend.loadModel(source, options) : backend.loadSource!(source, options));
  } catch (error) {
    throw toInferenceError(error, "INTERNAL", `backend '${backend.name}' failed to load '${describeSource(source)}'`);
  }
}

async function unavailable(backend: Backend): Promise<InferenceError> {
  let why = "it reported itself unavailable";
  try {
    if (backend.unavailableReason) why = await backend.unavailableReason();
  } catch (error) {
    why = `its unavailableReason() failed: ${error instanceof Error ? error.message : String(error)}`;
  }
  return new InferenceError("BACKEND_UNAVAILABLE", `backend '${backend.name}' is not available here: ${why}`, {
    details: { backend: backend.name, reason: why },
  });
}
