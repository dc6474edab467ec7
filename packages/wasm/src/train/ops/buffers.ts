/**
 * Buffers of the training ops. `like` makes new buffers of the same element
 * type as an existing one: the training ops index plain typed arrays and sum
 * in float64, so handed float64 buffers (the reference kernels read any array)
 * the whole graph runs in double precision: what the gradient checks' finite
 * differences need. In training every buffer is float32.
 */
import type { Kernels } from "../../kernels/types.js";

export function like(x: Float32Array, length: number): Float32Array {
  return new (x.constructor as Float32ArrayConstructor)(length);
}

/**
 * Named scratch buffers reused by every training step of one set of kernels,
 * in the kernels' own memory when they have one: there a matmul reads and
 * writes them in place (no staging copy), and since that memory only grows,
 * reusing the same few buffers is what keeps a long run's footprint at one
 * step's. A buffer is valid until the next request under its name.
 */
export class Workspace {
  private readonly views = new Map<string, Uint8Array>();
  private readonly arrays = new Map<string, Float32Array>();

  constructor(private readonly kernels: Kernels) {}

  /** At least `byteLength` bytes under `name` (previous contents not kept when it grows). */
  bytes(name: string, byteLength: number): Uint8Array {
    const held = this.views.get(name);
    if (held && held.byteLength >= byteLength) return held.subarray(0, byteLength);
    if (held) this.kernels.release?.(held);
    const view = this.kernels.allocate?.(byteLength) ?? new Uint8Array(byteLength);
    this.views.set(name, view);
    return view;
  }

  /** `length` float32 values under `name`. */
  floats(name: string, length: number): Float32Array {
    const view = this.bytes(name, length * 4);
    return new Float32Array(view.buffer, view.byteOffset, length);
  }

  /**
   * `length` float32 values under `name` in an array of their own, outside the kernels' memory (whose
   * ceiling the many buffers kept across steps could reach); previous contents not kept when it grows.
   */
  array(name: string, length: number): Float32Array {
    const held = this.arrays.get(name);
    if (held && held.length >= length) return held.subarray(0, length);
    const array = new Float32Array(length);
    this.arrays.set(name, array);
    return array;
  }
}

const workspaces = new WeakMap<Kernels, Workspace>();

/** The workspace of these kernels, made on first use and kept while they live. */
export function workspaceOf(kernels: Kernels): Workspace {
  let workspace = workspaces.get(kernels);
  if (!workspace) {
    workspace = new Workspace(kernels);
    workspaces.set(kernels, workspace);
  }
  return workspace;
}
