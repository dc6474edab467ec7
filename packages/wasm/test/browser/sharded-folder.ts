/**
 * A sharded copy of a Hugging Face model folder, for the tests of sharded loading: its
 * model.safetensors split in two shards (the tensors in file order, half in each) with a
 * model.safetensors.index.json, beside copies of its other files.
 */
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseSafetensors, toFloat32, writeSafetensors, type SafetensorsTensorSpec } from "@infer/formats";

export const SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];

/** Writes the sharded copy of `from` into `to`; `shardName` renames shards in the index only (to point it elsewhere). */
export function writeShardedCopy(from: string, to: string, shardName: (shard: string) => string = (shard) => shard): void {
  for (const name of readdirSync(from)) if (name !== "model.safetensors") copyFileSync(join(from, name), join(to, name));
  const single = parseSafetensors(new Uint8Array(readFileSync(join(from, "model.safetensors"))));
  const specs: SafetensorsTensorSpec[] = [...single.tensors.values()].map((tensor) => {
    if (tensor.dtype !== "F32" && tensor.dtype !== "F16" && tensor.dtype !== "BF16") throw new Error(`${tensor.name}: ${tensor.dtype} is not a float type`);
    return { name: tensor.name, dtype: tensor.dtype, shape: tensor.shape, data: toFloat32(tensor) };
  });
  const half = Math.ceil(specs.length / 2);
  const parts = [specs.slice(0, half), specs.slice(half)];
  const weightMap: Record<string, string> = {};
  parts.forEach((part, i) => {
    // The first shard keeps the file's __metadata__ (its tied-weight aliases).
    writeFileSync(join(to, SHARDS[i]!), writeSafetensors(part, i === 0 ? single.metadata : undefined));
    for (const spec of part) weightMap[spec.name] = shardName(SHARDS[i]!);
  });
  writeFileSync(join(to, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map: weightMap }, null, 2));
}
