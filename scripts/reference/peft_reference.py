#!/usr/bin/env python3
"""PyTorch + PEFT reference for the wasm engine's LoRA training.

For a Hugging Face model folder (default ../shared/models/tinystories-656k)
and a fixed initial adapter, writes the loss of a fixed batch, the LoRA
gradients of that loss, and the loss after one AdamW step, as JSON. The
wasm tests (packages/wasm/test/train/peft-reference.test.ts) hold the engine
to this fixture. Rerun with:

    pip install torch transformers peft safetensors
    python3 scripts/reference/peft_reference.py \
        --out packages/wasm/test/fixtures/train/tinystories-peft-step.json

The initial adapter is a formula both sides compute (initial_values below),
with B nonzero so the gradients of A are nonzero too.
"""
import argparse
import json
import math

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
TEXTS = ["Once upon a time, there was a little dog named Max.", "The sun was warm and the birds sang."]
RANK = 2
ALPHA = 4
TARGETS = ["q_proj", "v_proj", "down_proj"]
LEARNING_RATE = 1e-2


def initial_values(layer, module, count, scale, phase):
    """A deterministic stand-in for random values: scale * sin(1.3 i + 0.7 layer + module + phase)."""
    m = MODULES.index(module)
    return [scale * math.sin(1.3 * i + 0.7 * layer + m + phase) for i in range(count)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="../shared/models/tinystories-656k")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="eager")
    config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0, task_type="CAUSAL_LM")
    model = get_peft_model(model, config)

    input_ids = [tokenizer(text)["input_ids"] for text in TEXTS]
    # The second example's third target is masked out, as lossMask 0 drops it.
    loss_mask = [[1] * len(ids) for ids in input_ids]
    loss_mask[1][3] = 0

    adapted = {}
    with torch.no_grad():
        for name, module in model.named_modules():
            if not hasattr(module, "lora_A") or "default" not in module.lora_A:
                continue
            layer = int(name.split(".layers.")[1].split(".")[0])
            short = name.split(".")[-1]
            a = module.lora_A["default"].weight
            b = module.lora_B["default"].weight
            a.copy_(torch.tensor(initial_values(layer, short, a.numel(), 1 / math.sqrt(a.shape[1]), 0.0)).view_as(a))
            b.copy_(torch.tensor(initial_values(layer, short, b.numel(), 0.01, 0.5)).view_as(b))
            adapted[f"{layer}.{short}"] = module

    length = max(len(ids) for ids in input_ids)
    ids = torch.zeros(len(input_ids), length, dtype=torch.long)
    attention = torch.zeros(len(input_ids), length, dtype=torch.long)
    labels = torch.full((len(input_ids), length), -100, dtype=torch.long)
    for e, example in enumerate(input_ids):
        ids[e, : len(example)] = torch.tensor(example)
        attention[e, : len(example)] = 1
        for t, token in enumerate(example):
            if loss_mask[e][t]:
                labels[e, t] = token

    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
    loss.backward()
    gradients = {
        key: {
            "A": module.lora_A["default"].weight.grad.flatten().tolist(),
            "B": module.lora_B["default"].weight.grad.flatten().tolist(),
        }
        for key, module in sorted(adapted.items())
    }
    optimizer.step()
    with torch.no_grad():
        loss_after = model(input_ids=ids, attention_mask=attention, labels=labels).loss.item()

    with open(args.out, "w") as out:
        json.dump(
            {
                "about": "scripts/reference/peft_reference.py: torch " + torch.__version__,
                "rank": RANK,
                "alpha": ALPHA,
                "targetModules": TARGETS,
                "learningRate": LEARNING_RATE,
                "inputIds": input_ids,
                "lossMask": loss_mask,
                "loss": loss.item(),
                "lossAfterStep": loss_after,
                "gradients": {k: {h: [float(f"{x:.7g}") for x in v] for h, v in g.items()} for k, g in gradients.items()},
            },
            out,
        )
        out.write("\n")
    print(f"loss {loss.item():.7f}, after one step {loss_after:.7f}, {len(gradients)} adapted linears")


if __name__ == "__main__":
    main()
