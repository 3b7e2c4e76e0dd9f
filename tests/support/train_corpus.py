"""A generated corpus with learnable structure for the training tests.

Each animal has its own sound and food, each city its language: a model that reads the context
can fill a masked word far better than a unigram guess (which knows only word frequencies).
"""
from __future__ import annotations

import random
from pathlib import Path

ANIMALS = {"dog": ("barks", "bones"), "cat": ("meows", "fish"), "bird": ("sings", "seeds"),
           "cow": ("moos", "grass"), "frog": ("croaks", "flies"), "horse": ("neighs", "hay"),
           "duck": ("quacks", "bread"), "lion": ("roars", "meat")}
CITIES = {"paris": "french", "berlin": "german", "madrid": "spanish", "rome": "italian",
          "lisbon": "portuguese", "tokyo": "japanese"}
COLORS = ["red", "brown", "black", "white", "small", "big", "old", "young"]
PLACES = ["garden", "park", "field", "yard", "barn", "forest"]
NAMES = ["anna", "ben", "carla", "david", "ella", "felix", "greta", "hugo"]


def sentence(rng: random.Random) -> str:
    a = rng.choice(list(ANIMALS))
    sound, food = ANIMALS[a]
    city = rng.choice(list(CITIES))
    k = rng.randrange(4)
    if k == 0:
        return f"the {rng.choice(COLORS)} {a} {sound} in the {rng.choice(PLACES)}."
    if k == 1:
        return f"every morning the {a} eats {food} and then it {sound}."
    if k == 2:
        return f"{rng.choice(NAMES)} lives in {city} and speaks {CITIES[city]} at home."
    return f"in the {rng.choice(PLACES)} a {rng.choice(COLORS)} {a} eats {food}."


def write_corpus(path: Path, n: int = 2000, seed: int = 0) -> Path:
    rng = random.Random(seed)
    path = Path(path)
    path.write_text("\n".join(sentence(rng) for _ in range(n)) + "\n", encoding="utf-8")
    return path


def tiny_config(corpus: Path, out: Path, **kw):
    from core.train.config import TrainConfig

    base = dict(corpus=str(corpus), out=str(out), objective="mlm", init="fresh", tokenizer="word",
                layers=1, dim=48, heads=4, ffn=96, max_length=24, steps=300, batch_size=32,
                lr=3e-3, heldout=0.1, eval_every=100, eval_sentences=200, log_every=10,
                seed=0, device="cpu", precision="fp32", dropout=0.0, threads=1)
    base.update(kw)
    return TrainConfig(**base)
