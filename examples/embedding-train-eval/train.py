"""Fine-tune the base model on the training pairs for --steps steps (the train prep).

The loss is in-batch contrastive (multiple negatives ranking): each query must score its own
description above the batch's other descriptions. The seed fixes the batch order and the
initialisation of everything random; the model is saved into --out.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import torch
from aliases import read
from model import BUNDLED, autocast, embed, load

SCALE = 20.0  # cosine similarities times this are the logits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-model", required=True)
    parser.add_argument("--tokenizer", required=True, help="must be the base model's own")
    parser.add_argument("--precision", required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.tokenizer != args.base_model:
        parser.error(
            f"this example uses the base model's own tokenizer: set tokenizer: {args.base_model}"
        )
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    pairs = read(args.data, "train")
    model = load(args.base_model)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    start = time.perf_counter()
    losses = []
    for _ in range(args.steps):
        batch = random.sample(pairs, args.batch_size)
        with autocast(args.precision):
            queries = embed(model, [q for q, _ in batch])
            documents = embed(model, [d for _, d in batch])
        logits = queries @ documents.T * SCALE
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.save(str(args.out))
    print(f"BENCH_EFFECTIVE precision={args.precision}")
    print(f"BENCH_EFFECTIVE tokenizer={BUNDLED if args.base_model == BUNDLED else args.tokenizer}")
    print(f"train_s={time.perf_counter() - start}")
    print(f"final_loss={losses[-1] if losses else float('nan')}")


if __name__ == "__main__":
    main()
