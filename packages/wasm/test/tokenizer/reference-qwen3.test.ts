import { describeReferenceModel } from "./reference-compare.js";

describeReferenceModel({ name: "qwen3", ggufModel: "gpt2", ggufPre: "qwen2", nfc: true });
