/**
 * kv.snapshot for llama_cpp: a sequence's state (its tokens and KV cells) as
 * node-llama-cpp saves it to a file, in core's snapshot envelope (magic "ILKV").
 * node-llama-cpp warns that loading a state saved by another model may crash
 * the process, so the header names the model and carries the state's SHA-256:
 * another model's snapshot is refused (INVALID_OPTION), damaged bytes too
 * (MODEL_FORMAT), before llama.cpp reads anything.
 */
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InferenceError, toInferenceError, unwrapSnapshot, wrapSnapshot } from "@infer/core";
import type { LlamaContextSequence } from "node-llama-cpp";
import { assertSequenceStateShape, type StateLayout } from "./kv-state-shape.js";

const MAGIC = "ILKV";
const VERSION = 1;

/** What a saved state depends on: restoring into a model that differs in any of these is refused. */
export interface StateIdentity {
  architecture: string;
  vocabSize: number;
  numLayers: number;
  hiddenSize: number;
  parameters: number;
  kvType: string;
}

/** Runs `work` with a path in a fresh temporary folder, removed afterwards. */
async function withTempFile<T>(work: (path: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "infer-kv-"));
  try {
    return await work(join(dir, "state.bin"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** `sequence`'s state file as node-llama-cpp writes it. */
async function stateOf(sequence: LlamaContextSequence): Promise<Uint8Array> {
  return withTempFile(async (path) => {
    await sequence.saveStateToFile(path);
    return new Uint8Array(await readFile(path));
  });
}

/**
 * A snapshot of `sequence`. Its state must walk (kv-state-shape.ts) as a restore will walk it, else the
 * model's memory is of a kind the walk does not know and kv.snapshot is UNSUPPORTED for it.
 */
export async function saveSequenceState(sequence: LlamaContextSequence, identity: StateIdentity, layout: StateLayout): Promise<Uint8Array> {
  const state = await stateOf(sequence);
  try {
    assertSequenceStateShape(state, layout);
  } catch (error) {
    throw new InferenceError("UNSUPPORTED", `kv.snapshot: this model's llama.cpp state cannot be checked on restore (${(error as Error).message})`, { cause: error });
  }
  return wrapSnapshot(MAGIC, VERSION, { ...identity, sha256: sha256(state) }, state);
}

/**
 * Restores a snapshot into `sequence`, whose state is dropped. The checksum catches damage; the walk, against
 * the sections this context writes (learned at the first restore), a crafted state llama.cpp would abort on.
 */
export async function loadSequenceState(sequence: LlamaContextSequence, bytes: unknown, identity: StateIdentity, layout: StateLayout): Promise<void> {
  const { header, body } = unwrapSnapshot(bytes, MAGIC, VERSION, { ...identity });
  if (sha256(body) !== header.sha256) throw new InferenceError("MODEL_FORMAT", "a damaged KV snapshot: its state does not match its checksum");
  if (layout.sections === undefined) {
    // The sections are the context's: learned once, from a sequence's own state (emptied first, it is small).
    await sequence.clearHistory();
    layout.sections = assertSequenceStateShape(await stateOf(sequence), layout);
  }
  assertSequenceStateShape(body, layout);
  await withTempFile(async (path) => {
    await writeFile(path, body);
    try {
      await sequence.loadStateFromFile(path, { acceptRisk: true });
    } catch (error) {
      throw toInferenceError(error, "MODEL_FORMAT", "llama.cpp could not load the KV snapshot");
    }
  });
}
