import { describeReferenceModel } from "./reference-compare.js";

describeReferenceModel({ name: "llama3", ggufModel: "gpt2", ggufPre: "llama-bpe" });
