/**
 * Weights by name, from either file layout, checked against the shapes the
 * configuration implies. Architectures ask for GGUF-style names
 * ("blk.3.attn_q.weight"); a Hugging Face source translates them.
 */
import { InferenceError } from "@infer/core";
import { GgmlType, dequantizeRow, rowBytes, typeInfo, typeName, quantize } from "@infer/formats";
import type { WeightMatrix } from "../kernels/types.js";
import { dequantizeMatrixRow } from "../kernels/dequant.js";
import type { ModelFileFormat } from "./config.js";

/** One stored tensor: row-major shape (outermost first, so [rows, cols] for a matrix). */
export interface StoredTensor {
  shape: number[];
  /** UNSUPPORTED_TYPE for stored encodings the engine cannot compute with (then `dtype` names it). */
  type: GgmlType;
  data: Uint8Array;
  /** The file format's own name of the encoding, for messages (safetensors dtype). */
  dtype?: string;
}

/** Marks a stored tensor whose encoding has no GgmlType; using it as a weight fails with UNSUPPORTED_DTYPE. */
export const UNSUPPORTED_TYPE = -1 as GgmlType;

/** How matrices are prepared at load. */
export interface WeightOptions {
  /** Floating-point (F32, F16, BF16) matrices are re-encoded in this type once, at load. */
  quantize?: GgmlType;
  /** Where re-encoded matrices are placed (the kernels' memory, so matmul reads them in place). */
  allocate?(byteLength: number, align?: number): Uint8Array;
  /** The kernels' own layout of a matrix (Kernels.prepareMatrix), applied once per stored tensor. */
  prepare?(w: WeightMatrix): WeightMatrix;
}

const FLOAT_TYPES: ReadonlySet<GgmlType> = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16]);
/** Rows dequantized per step when re-encoding a matrix (bounds the float32 staging to a few MB). */
const QUANTIZE_ROWS_PER_STEP = 256;

export class WeightSource {
  /** Bytes and element counts of the tensors handed out, each stored tensor counted once. */
  private readonly used = new Map<StoredTensor, { bytes: number; elements: number }>();
  /** Matrices re-encoded at load, by stored tensor (a tied matrix is re-encoded once). */
  private readonly requantized = new Map<StoredTensor, WeightMatrix>();
  /** Matrices in the kernels' layout, by stored tensor. */
  private readonly prepared = new Map<StoredTensor, WeightMatrix>();
  /** The matrices handed out, by the GGUF-style name asked for: what a LoRA adapter's pairs attach to. */
  private readonly byName = new Map<string, WeightMatrix>();

  constructor(
    /** The file (or folder) the tensors come from, named in errors. */
    readonly file: string,
    readonly format: ModelFileFormat,
    private tensors: Map<string, StoredTensor>,
    /** Maps a GGUF-style name to this source's name (identity for GGUF). */
    private readonly storedName: (name: string) => string = (name) => name,
    private readonly options: WeightOptions = {},
  ) {}

  /** The name this source stores `name` under, for messages. */
  nameOf(name: string): string {
    return this.storedName(name);
  }

  has(name: string): boolean {
    return this.tensors.has(this.storedName(name));
  }

  /**
   * A [rows, cols] matrix kept in its stored encoding (F32 re-aligned when
   * needed), or in the kernels' layout of it (WeightOptions.prepare).
   */
  matrix(name: string, rows: number, cols: number): WeightMatrix {
    const matrix = this.storedMatrix(name, rows, cols);
    this.byName.set(name, matrix);
    return matrix;
  }

  /** Every matrix handed out so far, by GGUF-style name (the objects the architecture's blocks hold). */
  get matrices(): ReadonlyMap<string, WeightMatrix> {
    return this.byName;
  }

  private storedMatrix(name: string, rows: number, cols: number): WeightMatrix {
    const tensor = this.get(name, [rows, cols]);
    const done = this.prepared.get(tensor);
    if (done) return done;
    const target = this.options.quantize;
    let matrix: WeightMatrix;
    if (target !== undefined && target !== tensor.type && FLOAT_TYPES.has(tensor.type) && cols % typeInfo(target).blockSize === 0) {
      matrix = this.requantize(tensor, rows, cols, target);
    } else {
      matrix = { type: tensor.type, rows, cols, data: alignedData(tensor) };
    }
    // Once per tensor: a layout may be made in place, and a tied matrix is asked for twice.
    if (this.options.prepare) {
      matrix = this.options.prepare(matrix);
      this.prepared.set(tensor, matrix);
    }
    return matrix;
  }

  /**
   * A vector (norm weights, biases) as float32, whatever its stored type.
   * `learned` false marks a constant table (RoPE frequency factors): its bytes count, its elements are no parameters.
   */
  vector(name: string, length: number, learned = true): Float32Array {
    const tensor = this.get(name, [length], learned);
    const out = new Float32Array(length);
    dequantizeMatrixRow({ type: tensor.type, rows: 1, cols: length, data: alignedData(tensor) }, 0, out);
    return out;
  }

  /** The float matrix re-encoded in `target`, row block by row block (no full float32 copy). */
  private requantize(tensor: StoredTensor, rows: number, cols: number, target: GgmlType): WeightMatrix {
    const done = this.requantized.get(tensor);
    if (done) return done;
    const targetRowBytes = rowBytes(target, cols);
    const sourceRowBytes = rowBytes(tensor.type, cols);
    const data = this.options.allocate ? this.options.allocate(rows * targetRowBytes) : new Uint8Array(rows * targetRowBytes);
    const step = Math.min(rows, QUANTIZE_ROWS_PER_STEP);
    const floats = new Float32Array(step * cols); // [step, cols]
    for (let row = 0; row < rows; row += step) {
      const count = Math.min(step, rows - row);
      dequantizeRow(tensor.type, tensor.data, row * sourceRowBytes, count * cols, floats, 0);
      data.set(quantize(target, count === step ? floats : floats.subarray(0, count * cols)), row * targetRowBytes);
    }
    const matrix: WeightMatrix = { type: target, rows, cols, data };
    this.requantized.set(tensor, matrix);
    // Account the weight as it is now held: its new bytes and type.
    this.used.set(tensor, { bytes: rows * targetRowBytes, elements: rows * cols });
    this.elementsByType.set(tensor.type, (this.elementsByType.get(tensor.type) ?? 0) - rows * cols);
    this.elementsByType.set(target, (this.elementsByType.get(target) ?? 0) + rows * cols);
    return matrix;
  }

  optionalMatrix(name: string, rows: number, cols: number): WeightMatrix | undefined {
    return this.has(name) ? this.matrix(name, rows, cols) : undefined;
  }

  optionalVector(name: string, length: number, learned = true): Float32Array | undefined {
    return this.has(name) ? this.vector(name, length, learned) : undefined;
  }

  /** Row-major shape of a stored tensor, or undefined when absent. */
  shapeOf(name: string): number[] | undefined {
    return this.tensors.get(this.storedName(name))?.shape;
  }

  /**
   * Lets go of the stored tensors once the model is built (the handed-out
   * matrices stay as they are). The model's closures can keep this source
   * reachable, and a model re-encoded at load (WeightOptions.quantize) would
   * then keep the whole file it was read from: a Q8_0 model of SmolLM2-135M's
   * shape kept its 538 MB of float32 file beside its 143 MB of weights.
   * weightBytes and parameterCount keep their values.
   */
  release(): void {
    this.releasedTotals ??= { bytes: this.weightBytes, elements: this.parameterCount };
    this.tensors = new Map();
    this.used.clear();
    this.requantized.clear();
    this.prepared.clear();
  }

  /** weightBytes and parameterCount as they were when `release` dropped the tensors they count. */
  private releasedTotals: { bytes: number; elements: number } | undefined;

  get weightBytes(): number {
    if (this.releasedTotals) return this.releasedTotals.bytes;
    let total = 0;
    for (const { bytes } of this.used.values()) total += bytes;
    return total;
  }

  get parameterCount(): number {
    if (this.releasedTotals) return this.releasedTotals.elements;
    let total = 0;
    for (const { elements } of this.used.values()) total += elements;
    return total;
  }

  /** Element counts of the handed-out matrices per stored type (to find the dominant one). */
  private readonly elementsByType = new Map<GgmlType, number>();
  get matrixElementsByType(): ReadonlyMap<GgmlType, number> {
    return this.elementsByType;
  }

  private get(name: string, expected: number[], learned = true): StoredTensor {
    const stored = this.storedName(name);
    const tensor = this.tensors.get(stored);
    if (!tensor) {
      throw new InferenceError("MODEL_FORMAT", `${this.file}: tensor ${stored} is missing`, {
        details: { file: this.file, tensor: stored },
      });
    }
    if (tensor.type === UNSUPPORTED_TYPE) {
      throw new InferenceError(
        "UNSUPPORTED_DTYPE",
        `${this.file}: tensor ${stored} is stored as ${tensor.dtype ?? "an unknown type"}; weights must be F32, F16, BF16 or a GGUF type`,
        { details: { file: this.file, tensor: stored, dtype: tensor.dtype } },
      );
    }
    if (!sameShape(tensor.shape, expected)) {
      throw new InferenceError(
        "MODEL_FORMAT",
        `${this.file}: tensor ${stored} has shape [${tensor.shape.join(", ")}], expected [${expected.join(", ")}]`,
        { details: { file: this.file, tensor: stored, shape: tensor.shape, expected } },
      );
    }
    const elements = expected.reduce((a, b) => a * b, 1);
    const cols = expected[expected.length - 1]!;
    const bytes = (elements / cols) * rowBytes(tensor.type, cols);
    if (tensor.data.byteLength !== bytes) {
      throw new InferenceError(
        "MODEL_FORMAT",
        `${this.file}: tensor ${stored} (${typeName(tensor.type)}) holds ${tensor.data.byteLength} bytes, expected ${bytes}`,
        { details: { file: this.file, tensor: stored } },
      );
    }
    if (!this.used.has(tensor)) {
      this.used.set(tensor, { bytes, elements: learned ? elements : 0 });
      if (expected.length === 2) this.elementsByType.set(tensor.type, (this.elementsByType.get(tensor.type) ?? 0) + elements);
    }
    return tensor;
  }
}

/** Shapes match, treating trailing/leading 1s of a vector stored as [1, n] or [n, 1] as the same vector. */
function sameShape(actual: number[], expected: number[]): boolean {
  const squeeze = (shape: number[]) => (shape.length > 1 ? shape.filter((d) => d !== 1) : shape);
  if (expected.length === 1) {
    const a = squeeze(actual);
    return a.length === 1 && a[0] === expected[0];
  }
  return actual.length === expected.length && actual.every((d, i) => d === expected[i]);
}

/**
 * The tensor's bytes, copied when they are F32 at an offset not divisible by 4
 * (a safetensors data section may start anywhere): float32 views need alignment.
 */
function alignedData(tensor: StoredTensor): Uint8Array {
  return tensor.type === GgmlType.F32 && tensor.data.byteOffset % 4 !== 0 ? tensor.data.slice() : tensor.data;
}
