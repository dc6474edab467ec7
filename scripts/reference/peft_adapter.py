#!/usr/bin/env python3
"""
Makes the LoRA fixture the wasm tests check against: a PEFT adapter built by
PEFT itself on a small llama model, and the logits of a fixed prompt with and
without it, as PyTorch computes them.

    pip install torch transformers peft safetensors
    python scripts/reference/peft_adapter.py [../shared/models/tinystories-656k] [packages/wasm/test/fixtures/lora]
    python scripts/reference/peft_adapter.py --check <adapter-folder> [model-folder]

Writes <out>/peft-adapter/ (adapter_config.json, adapter_model.safetensors, as
PEFT's save_pretrained writes them) and <out>/peft-logits.json. CI never runs
this: the outputs are committed.

--check loads an adapter folder (one infer wrote, say) with PEFT, fails on any
warning PEFT or transformers gives, and prints the cosine of its logits for
the fixture's prompt against the committed adapterLogits.

--check-ours does the same for the adapter our trainer saved
(scripts/reference/infer_adapter.mjs writes it) and records the warnings and
PEFT's logits for the fixture's prompt in <adapter>-peft.json beside it.
"""
import json
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

SEED = 1234
PROMPT = "Once upon a time, there was a little dog named"
RANK = 4
ALPHA = 8
TARGETS = ["q_proj", "v_proj"]
# PEFT starts B at zero (the adapter changes nothing); the fixture needs a real delta.
B_STD = 0.2


def main() -> None:
    model_dir = sys.argv[1] if len(sys.argv) > 1 else "../shared/models/tinystories-656k"
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "packages/wasm/test/fixtures/lora"
    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    model.eval()
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        base_logits = model(ids).logits[0, -1].tolist()

    config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0, task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, config)
    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * B_STD)
    peft_model.eval()
    with torch.no_grad():
        adapter_logits = peft_model(ids).logits[0, -1].tolist()

    adapter_dir = os.path.join(out_dir, "peft-adapter")
    peft_model.save_pretrained(adapter_dir)
    # save_pretrained records the path the base was loaded from; keep the fixture free of this machine's paths.
    config_path = os.path.join(adapter_dir, "adapter_config.json")
    with open(config_path) as f:
        saved = json.load(f)
    saved["base_model_name_or_path"] = os.path.basename(os.path.normpath(model_dir))
    with open(config_path, "w") as f:
        json.dump(saved, f, indent=2, sort_keys=True)
        f.write("\n")
    readme = os.path.join(adapter_dir, "README.md")
    if os.path.exists(readme):
        os.remove(readme)

    fixture = {
        "model": os.path.basename(os.path.normpath(model_dir)),
        "prompt": PROMPT,
        "inputIds": ids[0].tolist(),
        "rank": RANK,
        "alpha": ALPHA,
        "targetModules": TARGETS,
        "versions": {"torch": torch.__version__, "peft": __import__("peft").__version__, "transformers": __import__("transformers").__version__},
        "baseLogits": [round(v, 6) for v in base_logits],
        "adapterLogits": [round(v, 6) for v in adapter_logits],
    }
    with open(os.path.join(out_dir, "peft-logits.json"), "w") as f:
        json.dump(fixture, f)
        f.write("\n")


def load_with_peft(adapter_dir: str, model_dir: str):
    """PEFT's model for the adapter on the base, and every warning loading it gave."""
    import logging
    import warnings

    from peft import PeftModel

    captured = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record.getMessage())

    logging.getLogger().addHandler(Capture(level=logging.WARNING))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        model = PeftModel.from_pretrained(base, adapter_dir)
    captured += [str(w.message) for w in caught]
    return model, captured


def read_fixture() -> dict:
    with open(os.path.join(os.path.dirname(__file__), "../../packages/wasm/test/fixtures/lora/peft-logits.json")) as f:
        return json.load(f)


def check(adapter_dir: str, model_dir: str) -> None:
    model, captured = load_with_peft(adapter_dir, model_dir)
    fixture = read_fixture()
    with torch.no_grad():
        logits = model.eval()(torch.tensor([fixture["inputIds"]])).logits[0, -1]
    cosine = torch.nn.functional.cosine_similarity(logits, torch.tensor(fixture["adapterLogits"]), dim=0).item()
    print(json.dumps({"warnings": captured, "cosine": cosine}))
    if captured:
        sys.exit(1)


def check_ours(adapter_dir: str, model_dir: str) -> None:
    model, captured = load_with_peft(adapter_dir, model_dir)
    fixture = read_fixture()
    with torch.no_grad():
        logits = model.eval()(torch.tensor([fixture["inputIds"]])).logits[0, -1].tolist()
    record = {
        "adapter": os.path.basename(os.path.normpath(adapter_dir)),
        "inputIds": fixture["inputIds"],
        "versions": {"torch": torch.__version__, "peft": __import__("peft").__version__, "transformers": __import__("transformers").__version__},
        "warnings": captured,
        "logits": [round(v, 6) for v in logits],
    }
    with open(os.path.normpath(adapter_dir) + "-peft.json", "w") as f:
        json.dump(record, f)
        f.write("\n")
    print(json.dumps({"warnings": captured}))
    if captured:
        sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--check-ours":
        check_ours(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "../shared/models/tinystories-656k")
    elif len(sys.argv) > 2 and sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "../shared/models/tinystories-656k")
    else:
        main()
