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

export async function saveSequenceState(sequence: LlamaContextSequence, identity: StateIdentity): Promise<Uint8Array> {
  const state = await withTempFile(async (path) => {
    await sequence.saveStateToFile(path);
    return new Uint8Array(await readFile(path));
  });
  return wrapSnapshot(MAGIC, VERSION, { ...identity, sha256: sha256(state) }, state);
}

export async function loadSequenceState(sequence: LlamaContextSequence, bytes: unknown, identity: StateIdentity): Promise<void> {
  const { header, body } = unwrapSnapshot(bytes, MAGIC, VERSION, { ...identity });
  if (sha256(body) !== header.sha256) throw new InferenceError("MODEL_FORMAT", "a damaged KV snapshot: its state does not match its checksum");
  await withTempFile(async (path) => {
    await writeFile(path, body);
    try {
      await sequence.loadStateFromFile(path, { acceptRisk: true });
    } catch (error) {
      throw toInferenceError(error, "MODEL_FORMAT", "llama.cpp could not load the KV snapshot");
    }
  });
}
