import { describeReferenceModel } from "./reference-compare.js";

describeReferenceModel({ name: "llama2", ggufModel: "llama" });
