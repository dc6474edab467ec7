// Test helpers: small random models of every architecture, in GGUF and Hugging Face layouts.
export {
  longRopeParameters,
  permuteForNormalRope,
  randomModelDims,
  randomTensors,
  writeRandomGguf,
  writeRandomHf,
  type RandomArchitecture,
  type RandomGgufSpec,
  type RandomHfSpec,
  type RandomModelDims,
  type RandomModelSpec,
} from "./random-models.js";
export { byteToUnicode, byteVocab, byteVocabTokenizerJson, syntheticVocab, type ByteVocab } from "./byte-vocab.js";
