import { describeReferenceModel } from "./reference-compare.js";

describeReferenceModel({ name: "gemma3", ggufModel: "llama" });
