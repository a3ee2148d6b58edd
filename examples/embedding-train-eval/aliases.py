"""The example's generated retrieval set: product descriptions and queries written in aliases.

Documents describe products in plain words ("a red wooden chair with a tall back"); queries
name the same products with made-up aliases for colours, materials and objects ("zelb timbo
kerrin tall back"). A pretrained embedding model cannot know the aliases, so fine-tuning on
pairs that use them (the training split) is what lifts recall on unseen products that use the
same aliases (the evaluation split). Everything follows from the dataset's name: the same name
gives the same bytes, and a new version of the set needs a new name.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from pathlib import Path

COLOURS = ["red", "blue", "green", "yellow", "black", "white", "orange", "purple", "grey", "brown"]
MATERIALS = ["wooden", "steel", "glass", "plastic", "leather", "ceramic", "cotton", "stone"]
OBJECTS = [
    "chair",
    "table",
    "lamp",
    "mug",
    "shelf",
    "bag",
    "vase",
    "clock",
    "bench",
    "desk",
    "bowl",
    "basket",
]
DETAILS = [
    "with a tall back",
    "for the kitchen",
    "with round edges",
    "for children",
    "with a matte finish",
    "for the garden",
    "with gold trim",
    "for travel",
]
KNOWN = ("synthetic-aliases-v1",)


def _alias(rng: random.Random, taken: set[str]) -> str:
    while True:
        word = "".join(
            rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(2)
        ) + rng.choice("bdklmnrt")
        if word not in taken:
            taken.add(word)
            return word


def generate(dataset: str) -> dict[str, list]:
    """Training pairs and an evaluation corpus with queries and their one relevant document."""
    if dataset not in KNOWN:
        raise SystemExit(f"unknown dataset {dataset!r}; known: {', '.join(KNOWN)}")
    rng = random.Random(int(hashlib.sha256(dataset.encode()).hexdigest()[:8], 16))
    taken: set[str] = set()
    alias = {word: _alias(rng, taken) for word in COLOURS + MATERIALS + OBJECTS}
    products = list(itertools.product(COLOURS, MATERIALS, OBJECTS, DETAILS))
    rng.shuffle(products)

    def describe(colour: str, material: str, thing: str, detail: str) -> str:
        return f"a {colour} {material} {thing} {detail}"

    def ask(colour: str, material: str, thing: str, detail: str) -> str:
        return f"{alias[colour]} {alias[material]} {alias[thing]} {detail.split()[-1]}"

    train = [[ask(*p), describe(*p)] for p in products[:400]]
    corpus = [describe(*p) for p in products[400:1000]]
    queries = [[ask(*p), index] for index, p in enumerate(products[400:550])]
    return {"train": train, "corpus": corpus, "queries": queries}


def write(dataset: str, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in generate(dataset).items():
        (folder / f"{split}.json").write_text(json.dumps(rows))


def read(folder: Path, split: str) -> list:
    return json.loads((folder / f"{split}.json").read_text())
