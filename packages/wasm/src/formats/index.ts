// Model file formats: ggml encodings, GGUF and safetensors readers and writers.
export {
  CODEC_TYPES,
  GgmlType,
  QK_K,
  dequantize,
  dequantizeRow,
  findTypeInfo,
  rowBytes,
  scaleMinK4,
  typeInfo,
  typeName,
} from "./ggml-types.js";
export type { GgmlTypeInfo } from "./ggml-types.js";
export { quantize } from "./ggml-quantize.js";
export { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "./half.js";
export {
  GgufMetadata,
  GgufValueType,
  getArray,
  getBoolean,
  getNumber,
  getNumberArray,
  getString,
  getStringArray,
  valueTypeName,
} from "./gguf-values.js";
export type { GgufArray, GgufArrayItems, GgufValue } from "./gguf-values.js";
export { PackedStrings } from "./packed-strings.js";
export { GGUF_DEFAULT_ALIGNMENT, parseGguf, parseGgufHeader, readGguf, readGgufHeader } from "./gguf.js";
export type { GgufFile, GgufHeader, GgufTensorInfo } from "./gguf.js";
export { writeGguf, writeGgufFile } from "./gguf-writer.js";
export type { GgufTensorSpec, GgufValueInput, GgufWriteSpec } from "./gguf-writer.js";
export {
  MAX_SAFETENSORS_HEADER_BYTES,
  SAFETENSORS_DTYPE_BYTES,
  parseSafetensors,
  readSafetensors,
  readSafetensorsModel,
  toFloat32,
} from "./safetensors.js";
export type { SafetensorsDtype, SafetensorsFile, SafetensorsModel, SafetensorsTensor } from "./safetensors.js";
export { writeSafetensors, writeSafetensorsFile } from "./safetensors-writer.js";
export type { SafetensorsTensorSpec } from "./safetensors-writer.js";
