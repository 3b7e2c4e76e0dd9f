"""Shared by the causal-analysis tests: a tiny random BERT with a masked-LM head (ours on the scratch
backend, and transformers' BertForMaskedLM of the same folder, eager attention), and the
reference readouts written with transformers only (no core.intervene code)."""
from __future__ import annotations

import numpy as np
import torch

from core.encoder.backends import get_backend
from tests.support.tiny_models import make_tiny_bert


def tiny_pair(folder):
    """(our backend, transformers' BertForMaskedLM) of one tiny folder whose attention is sharpened
    (random init attends almost uniformly, where cuts and patches change little)."""
    from transformers import BertForMaskedLM
    make_tiny_bert(folder, n_layers=3, n_heads=4, mlm=True)
    model = BertForMaskedLM.from_pretrained(str(folder))
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            layer.attention.self.query.weight.mul_(12)
            layer.attention.self.key.weight.mul_(12)
            layer.attention.self.value.weight.mul_(8)
        model.cls.predictions.transform.LayerNorm.weight.mul_(20)     # peaked guesses at a mask
    model.save_pretrained(str(folder))
    backend = get_backend(str(folder), "scratch", device="cpu")
    ref = BertForMaskedLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    return backend, ref


def tiny_pair_and_another(folder):
    """(tiny_pair's backend, the backend of another, smaller model: a 1-layer, 2-head DistilBERT)
    for the app's tests of a model switch."""
    from tests.support.tiny_models import make_tiny_distilbert
    backend, _ = tiny_pair(folder / "pair")
    other = make_tiny_distilbert(folder / "other", n_layers=1, n_heads=2, seed=2)
    return backend, get_backend(str(other), "scratch", device="cpu", precision="fp32")


def hooked(ref, hooks, ids):
    """transformers' run of one sentence with (module, kind, fn) hooks: (last hidden (T, D), logits (T, V))."""
    handles = []
    for module, kind, fn in hooks:
        if kind == "pre":
            handles.append(module.register_forward_pre_hook(fn))
        elif kind == "pre_kw":
            handles.append(module.register_forward_pre_hook(fn, with_kwargs=True))
        else:
            handles.append(module.register_forward_hook(fn))
    try:
        with torch.no_grad():
            t = torch.tensor([ids])
            out = ref(input_ids=t, attention_mask=torch.ones_like(t), output_hidden_states=True)
            return out.hidden_states[-1][0], out.logits[0]
    finally:
        for h in handles:
            h.remove()


def capture(ref, ids):
    """B's clean numbers at every site: per layer the heads' context (out dense's input), the FFN
    output (output.dense's output) and the layer's output."""
    got = {"context": {}, "ffn": {}, "layer": {}}
    hooks = []
    for i, layer in enumerate(ref.bert.encoder.layer):
        hooks.append((layer.attention.output.dense, "pre",
                      lambda m, a, i=i: got["context"].__setitem__(i, a[0].clone())))
        hooks.append((layer.output.dense, "post", lambda m, a, o, i=i: got["ffn"].__setitem__(i, o.clone())))
        hooks.append((layer, "post", lambda m, a, o, i=i: got["layer"].__setitem__(i, o.clone())))
    hooked(ref, hooks, ids)
    return got


def unit_mean(h) -> np.ndarray:
    v = h.double().mean(0).numpy()
    return v / np.linalg.norm(v)
