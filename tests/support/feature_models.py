"""Shared by the features tests: a tiny BERT (ours on the scratch backend, fp32 CPU, and
transformers' BertModel of the same folder, eager attention), a small corpus of its words, and a
small SAE trained on it in a few steps."""
from __future__ import annotations

import random

import torch

from core.encoder.backends import get_backend
from tests.support.tiny_models import WORDS, make_tiny_bert


def tiny_corpus(n: int = 120, seed: int = 0) -> list[str]:
    """n sentences of 3 to 9 of the tiny vocabulary's words (some repeated, so features recur)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS[:60]) for _ in range(rng.randint(3, 9))) + "." for _ in range(n)]


def tiny_bert_pair(folder, mlm: bool = True):
    """(our backend, transformers' BertModel) of one tiny 3-layer BERT folder."""
    from transformers import BertModel
    make_tiny_bert(folder, n_layers=3, n_heads=4, mlm=mlm)
    backend = get_backend(str(folder), "scratch", device="cpu", precision="fp32")
    ref = BertModel.from_pretrained(str(folder), attn_implementation="eager", add_pooling_layer=False).eval()
    return backend, ref


def small_config(**kw):
    from core.features.train import TrainConfig
    base = dict(site="L2.resid", width=64, k=4, tokens=3000, seed=0, batch=256, lr=3e-3)
    return TrainConfig(**{**base, **kw})


def hidden_after(ref, ids: list[int], layer: int) -> torch.Tensor:
    """transformers' residual stream after block ``layer`` (0-based) for one sentence: (T, D)."""
    with torch.no_grad():
        t = torch.tensor([ids])
        out = ref(input_ids=t, attention_mask=torch.ones_like(t), output_hidden_states=True)
        return out.hidden_states[layer + 1][0]
