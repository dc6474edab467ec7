// Model files on disk (Node): reading GGUF and safetensors files and folders, writing them.
export { readGguf, readGgufHeader, readGgufMetadataPrefix } from "./gguf-file.js";
export { readSafetensors, readSafetensorsModel, writeSafetensorsFile } from "./safetensors-file.js";
export { writeGgufFile } from "./gguf-file.js";
export { readWholeFile, withOpenFile } from "./read-file.js";
export type { FileBufferAllocator } from "./read-file.js";
