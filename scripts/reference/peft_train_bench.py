#!/usr/bin/env python3
"""PyTorch + PEFT side of `npm run bench:train`: LoRA training speed on CPU.

Loads a Hugging Face folder in float32, attaches LoRA (PEFT's defaults
otherwise), and times full training steps (forward with labels, backward,
AdamW step) on random token ids. Prints one JSON line: tokens/s (median step)
and the process's peak RSS. Run alone with:

    pip install torch transformers peft safetensors
    python3 scripts/reference/peft_train_bench.py --model <hf-folder> --threads 2
"""
import argparse
import json
import resource
import statistics
import sys
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--alpha", type=float, default=16)
    parser.add_argument("--targets", default="q_proj,v_proj")
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    config = LoraConfig(r=args.rank, lora_alpha=args.alpha, target_modules=args.targets.split(","), lora_dropout=0.0, task_type="CAUSAL_LM")
    model = get_peft_model(model, config)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    vocab = model.config.vocab_size
    input_ids = torch.randint(3, vocab, (args.batch, args.seq))
    times = []
    # One untimed step first: allocations and lazy initialisation.
    for step in range(args.steps + 1):
        start = time.perf_counter()
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step > 0:
            times.append(time.perf_counter() - start)
    # ru_maxrss is KiB on Linux.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tokens = args.batch * (args.seq - 1)
    json.dump({"tokensPerSecond": tokens / statistics.median(times), "peakRssBytes": peak, "loss": loss.item()}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
