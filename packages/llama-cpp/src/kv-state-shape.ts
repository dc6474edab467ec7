// A llama.cpp sequence state file (llama_state_seq_save_file, format 3), walked by its own declared sizes
// before llama.cpp reads it. llama.cpp checks each type and row size against the model, but its file reader
// clamps a read that runs past the end instead of failing, and a state claiming more than it holds then
// reaches GGML_ASSERT(nread <= state_size): the process aborts. It also sizes a batch from the cell count
// before looking at the cache. Snapshots carry a SHA-256, which catches damage, not a crafted file; so a
// state is restored only when this walk ends exactly at its last byte with every count in bounds, and
// llama.cpp then reads exactly what was walked or refuses a value, cleanly.
import { InferenceError } from "@infer/core";
import { type GgufHeader, getString } from "@infer/formats";

/** What the walk needs to know of the model and context. */
export interface StateLayout {
  /** The most cells a cache holds. */
  cells: number;
  /** llama_kv_cell_ext (x, y, token: 12 bytes) follows each cell's position on M-RoPE and per-layer-embedding models; else 0. */
  cellExtBytes: number;
  /** The stream count of each cache section, as this context writes them (learned at the first restore, then kept). */
  sections?: number[];
}

const SEQ_MAGIC = 0x67677371; // "ggsq"
const SEQ_VERSION = 3;
/** More layers than any model has: a bound for the walk, not a rule of the format. */
const MAX_LAYERS = 4096;

/** The layout of `header`'s model: its cell extension, from the keys its loader decides it by. */
export function stateLayoutOf(header: GgufHeader, cells: number): StateLayout {
  const arch = getString(header.metadata, "general.architecture") ?? "";
  const extended = header.metadata.has(`${arch}.rope.dimension_sections`) || header.metadata.has(`${arch}.ple.layers`);
  return { cells, cellExtBytes: extended ? 12 : 0 };
}

/**
 * MODEL_FORMAT unless `body` walks as a sequence state of `layout` that ends exactly at its last byte, with
 * the sections and streams `layout` names. Resolves with the stream count of each section.
 */
export function assertSequenceStateShape(body: Uint8Array, layout: StateLayout): number[] {
  const sections: number[] = [];
  let problem = walk(body, layout, sections);
  if (problem === undefined && layout.sections && sections.join() !== layout.sections.join()) {
    problem = `has cache sections of [${sections.join(", ")}] streams where this model's context has [${layout.sections.join(", ")}]`;
  }
  if (problem !== undefined) throw new InferenceError("MODEL_FORMAT", `a damaged KV snapshot: its llama.cpp state ${problem}`);
  return sections;
}

function walk(body: Uint8Array, { cells, cellExtBytes }: StateLayout, sections: number[]): string | undefined {
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  let at = 0;
  const need = (bytes: number) => Number.isSafeInteger(bytes) && bytes >= 0 && at + bytes <= body.length;
  const u32 = () => {
    const value = view.getUint32(at, true);
    at += 4;
    return value;
  };
  if (!need(12)) return "is shorter than its header";
  if (u32() !== SEQ_MAGIC) return "lacks the sequence state magic";
  const version = u32();
  if (version !== SEQ_VERSION) return `is format ${version}, not ${SEQ_VERSION}`;
  const tokens = u32();
  if (!need(tokens * 4)) return `claims ${tokens} tokens, more than it holds`;
  at += tokens * 4;
  // One section per cache: two for a model with sliding-window layers (its base and SWA caches).
  while (at < body.length) {
    if (sections.length === 2) return "has more cache sections than a model has caches";
    if (!need(4)) return "ends inside a cache section";
    const streams = u32();
    if (streams < 1 || streams > 256) return `has ${streams} cache streams`;
    sections.push(streams);
    for (let s = 0; s < streams; s++) {
      if (!need(4)) return "ends before a stream's cell count";
      const count = u32();
      if (count === 0) continue;
      if (count > cells) return `holds ${count} cells, more than the context's ${cells}`;
      // Each cell: position, n_seq_id (1 in a sequence's state), its extension, one sequence id. The
      // positions end at the last token's: the next decode continues from there, and llama.cpp refuses
      // (an evaluation failure) positions that do not.
      let last = -1;
      for (let i = 0; i < count; i++) {
        if (!need(8)) return "ends inside its cells";
        const position = view.getInt32(at, true);
        at += 4;
        if (position < 0 || position >= tokens) return `has a cell at position ${position}, outside its ${tokens} tokens`;
        last = Math.max(last, position);
        if (u32() !== 1) return "has a cell of more or fewer than one sequence";
        if (!need(cellExtBytes + 4)) return "ends inside its cells";
        at += cellExtBytes + 4;
      }
      if (last !== tokens - 1) return `has cells ending at position ${last}, not at its last token's (${tokens - 1})`;
      if (!need(8)) return "ends before its tensor data";
      const transposed = u32();
      const layers = u32();
      if (layers > MAX_LAYERS) return `claims ${layers} layers`;
      for (const part of ["keys", "values"]) {
        for (let l = 0; l < layers; l++) {
          if (part === "values" && transposed !== 0) {
            // Type, element size, row count, then each row's elements of every cell.
            if (!need(12)) return `ends inside layer ${l}'s ${part}`;
            at += 4;
            const element = u32();
            const rows = u32();
            if (!need(element * rows * count)) return `claims more ${part} data for layer ${l} than it holds`;
            at += element * rows * count;
          } else {
            // Type, row size (u64), then a row per cell.
            if (!need(12)) return `ends inside layer ${l}'s ${part}`;
            at += 4;
            const row = Number(view.getBigUint64(at, true));
            at += 8;
            if (!need(row * count)) return `claims more ${part} data for layer ${l} than it holds`;
            at += row * count;
          }
        }
      }
    }
  }
  return sections.length === 0 ? "has no cache section" : undefined;
}
