/**
 * New buffers of the same element type as an existing one. The training ops
 * index plain typed arrays and sum in float64, so handed float64 buffers
 * (the reference kernels read any array) the whole graph runs in double
 * precision: what the gradient checks' finite differences need. In training
 * every buffer is float32.
 */
export function like(x: Float32Array, length: number): Float32Array {
  return new (x.constructor as Float32ArrayConstructor)(length);
}
