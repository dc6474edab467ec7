// Model file formats, portable: the ggml tensor types and their codecs, GGUF and safetensors
// parsers and writers over bytes in memory. Reading and writing files: @infer/formats/node.
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
export { bf16ToF32, f16Table65536, f16ToF32, f32ToBf16, f32ToF16 } from "./half.js";
export {
  GGUF_SCALAR_BYTES,
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
export { GGUF_FILE_TYPES, describeQuantization, describeTensorType, elementCount, fileTypeId } from "./gguf-file-types.js";
export type { GgufFileType, QuantDescription, TensorSummary } from "./gguf-file-types.js";
export { GgufTokenType } from "./gguf-token-types.js";
export { PackedStrings, sameBytes } from "./packed-strings.js";
export {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_MAX_DIMS,
  GGUF_MIN_METADATA_ENTRY_BYTES,
  GGUF_MIN_TENSOR_INFO_BYTES,
  GGUF_PREAMBLE_BYTES,
  GGUF_VERSIONS,
  hasGgufMagic,
  parseGguf,
  parseGgufHeader,
  parseGgufMetadataPrefix,
} from "./gguf.js";
export type { GgufFile, GgufHeader, GgufTensorInfo } from "./gguf.js";
export { writeGguf } from "./gguf-writer.js";
export type { GgufTensorSpec, GgufValueInput, GgufWriteSpec } from "./gguf-writer.js";
export { MAX_SAFETENSORS_HEADER_BYTES, SAFETENSORS_DTYPE_BYTES, parseSafetensors, toFloat32 } from "./safetensors.js";
export type { SafetensorsDtype, SafetensorsFile, SafetensorsModel, SafetensorsTensor } from "./safetensors.js";
export { writeSafetensors } from "./safetensors-writer.js";
export { SAFETENSORS_INDEX, missingShard, outsideFolder, parseSafetensorsIndex, readSafetensorsShards } from "./safetensors-index.js";
export type { SafetensorsIndex } from "./safetensors-index.js";
export { decodeUtf8 } from "./utf8.js";
export type { SafetensorsTensorSpec } from "./safetensors-writer.js";
