/**
 * Training checkpoints as one file: a little-endian uint32 header length, the
 * JSON header (trainer state, model state without tensor data, each tensor's
 * length), then the tensors as float64. Saving writes a temporary file beside
 * it and renames it over the old one, so a crash leaves one whole checkpoint.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { InferenceError } from "../errors.js";
import type { CheckpointStore, TrainCheckpoint } from "../trainer.js";

const MAGIC = "infer-checkpoint-1";

export function encodeCheckpoint(checkpoint: TrainCheckpoint): Uint8Array {
  const { tensors, ...model } = checkpoint.model;
  const header = { magic: MAGIC, trainer: checkpoint.trainer, model, tensors: tensors.map((t) => ({ name: t.name, length: t.values.length })) };
  const json = new TextEncoder().encode(JSON.stringify(header));
  // The float64 data starts 8-byte aligned.
  const dataStart = Math.ceil((4 + json.length) / 8) * 8;
  const total = dataStart + tensors.reduce((n, t) => n + t.values.length * 8, 0);
  const bytes = new Uint8Array(total);
  new DataView(bytes.buffer).setUint32(0, json.length, true);
  bytes.set(json, 4);
  let at = dataStart;
  for (const tensor of tensors) {
    bytes.set(new Uint8Array(tensor.values.buffer, tensor.values.byteOffset, tensor.values.byteLength), at);
    at += tensor.values.byteLength;
  }
  return bytes;
}

export function decodeCheckpoint(bytes: Uint8Array, file: string): TrainCheckpoint {
  const bad = (why: string) => new InferenceError("MODEL_FORMAT", `${file} is not a training checkpoint: ${why}`, { details: { option: "resume", file } });
  if (bytes.length < 4) throw bad("too short");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const jsonLength = view.getUint32(0, true);
  if (4 + jsonLength > bytes.length) throw bad("its header runs past the end");
  let header: { magic?: string; trainer: TrainCheckpoint["trainer"]; model: Omit<TrainCheckpoint["model"], "tensors">; tensors: { name: string; length: number }[] };
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + jsonLength))) as typeof header;
  } catch (error) {
    throw Object.assign(bad("its header is not JSON"), { cause: error });
  }
  if (header.magic !== MAGIC || !Array.isArray(header.tensors)) throw bad(`unknown header ${JSON.stringify(header.magic)}`);
  let at = Math.ceil((4 + jsonLength) / 8) * 8;
  const tensors = header.tensors.map(({ name, length }) => {
    if (!Number.isInteger(length) || length < 0 || at + length * 8 > bytes.length) throw bad(`tensor ${name} runs past the end`);
    const values = new Float64Array(length);
    new Uint8Array(values.buffer).set(bytes.subarray(at, at + length * 8));
    at += length * 8;
    return { name, values };
  });
  return { trainer: header.trainer, model: { ...header.model, tensors } };
}

/** A CheckpointStore keeping the last checkpoint in `dir`/checkpoint.bin. */
export function checkpointDirectory(dir: string): CheckpointStore & { readonly path: string } {
  const path = join(dir, "checkpoint.bin");
  return {
    path,
    async save(checkpoint) {
      await mkdir(dirname(path), { recursive: true });
      const temporary = `${path}.${process.pid}.tmp`;
      await writeFile(temporary, encodeCheckpoint(checkpoint));
      await rename(temporary, path);
    },
    async load() {
      let bytes: Uint8Array;
      try {
        bytes = await readFile(path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw new InferenceError("IO", `cannot read ${path}: ${(error as Error).message}`, { cause: error, details: { file: path } });
      }
      return decodeCheckpoint(bytes, path);
    },
  };
}
