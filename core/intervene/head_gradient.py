"""Michel et al. (2019, "Are Sixteen Heads Really Better than One?") gradient head importance.

Every head's output is multiplied by a gate xi_h (1: the model as it is). The importance of head h
is the expected absolute gradient of a loss with respect to its gate,
    I_h = E_x | dL(x) / d xi_h |,
a first-order (Taylor) estimate of what masking the head would cost on example x. One forward and
one backward pass give every head's number, where the measured drop (importance.py) re-runs the
model once per head: this module puts the two side by side.

The loss, per example, for the metric the drop is measured with:
* "spearman": (cos(a, b) - score / 5)^2 over the shipped scored pairs (sentence-transformers'
  CosineSimilarityLoss; Spearman itself has no gradient); the gate of pair i acts on both sentences.
* "mlm": -mean log p of the seeded masked tokens of each sample text (what the mlm metric averages).
Each example gets its own gates, so one backward pass of the summed loss gives every example's
own gradient. Runs at the backend's precision.
"""
from __future__ import annotations

import numpy as np
import torch

from core import assets
from core.device import autocast
from core.encoder.pooling import l2_normalize, pool
from core.errors import Cancelled, InputError
from core.evaluate.metrics import spearman
from core.evaluate.pairs import read_scored_pairs
from core.intervene.apply import encoder_of
from core.intervene.restore import finish_block, heads_context

GRADIENT_METRICS = ("spearman", "mlm")
SCORE_SCALE = 5.0        # the shipped pairs' scores run 0-5
LOSSES = {"spearman": "(cos(a, b) - score/5)^2 per shipped pair",
          "mlm": "-mean log p of each sample text's seeded masked tokens"}


def gated_forward(encoder, input_ids: torch.Tensor, mask: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """Final hidden states (N, T, D) with head h of layer l's output multiplied by gates[n, l, h]."""
    cfg = encoder.config
    x = encoder.embeddings(input_ids)
    bias = encoder.bias(mask, x)
    dh = cfg.dim // cfg.n_heads
    for layer, block in enumerate(encoder.transformer.layer):
        context = heads_context(block, x, bias)
        scale = gates[:, layer].repeat_interleave(dh, -1)[:, None, :]        # (N, 1, D)
        x, _ = finish_block(block, x, context * scale.to(context.dtype))
    return encoder.normalise_layer(x)


def head_gradient_importance(backend, metric: str = "spearman", seed: int = 0, batch_size: int = 32,
                             progress=None, cancel=None) -> np.ndarray:
    """I_h (L, H) for ``metric``. progress(done, total) in examples; cancel() between batches."""
    if metric not in GRADIENT_METRICS:
        raise InputError(f"gradient head importance is measured for {', '.join(GRADIENT_METRICS)}, not {metric!r} "
                         "(recall@k has no loss to differentiate)")
    encoder = encoder_of(backend)
    cfg = encoder.config
    L, H = cfg.n_layers, cfg.n_heads
    total = torch.zeros(L, H, dtype=torch.float64)
    examples = _examples(backend, metric, seed)
    n = sum(len(rows) for rows, *_ in examples)
    done = 0
    with torch.enable_grad(), autocast(backend.device, backend.precision):
        for rows, loss_of in ((r, fn) for r, fn in examples):
            if cancel is not None and cancel():
                raise Cancelled("gradient head importance cancelled")
            gates = torch.ones(len(rows), L, H, device=backend.device, requires_grad=True)
            (grad,) = torch.autograd.grad(loss_of(gates).sum(), gates)
            total += grad.abs().double().sum(0).cpu()
            done += len(rows)
            if progress is not None:
                progress(done, n)
    return (total / n).numpy()


def _examples(backend, metric: str, seed: int) -> list:
    """[(examples of one batch, gates (n, L, H) -> per-example loss (n,))]."""
    encoder = encoder_of(backend)
    pooling = backend.choose_pooling(None)
    out = []
    if metric == "spearman":
        pairs = read_scored_pairs(assets.eval_pairs())
        ids_a, _ = backend.encode_ids(list(pairs.a))
        ids_b, _ = backend.encode_ids(list(pairs.b))
        gold = torch.tensor(np.asarray(pairs.scores, dtype=np.float32) / SCORE_SCALE, device=backend.device)
        for start in range(0, len(pairs), 32):
            rows = list(range(start, min(start + 32, len(pairs))))

            def loss(gates, rows=rows):
                vs = []
                for ids in (ids_a, ids_b):
                    input_ids, mask = backend._batch([ids[i] for i in rows])
                    y = gated_forward(encoder, input_ids, mask, gates)
                    vs.append(l2_normalize(pool(y.float(), mask, pooling, query=encoder.pooling_query)))
                return ((vs[0] * vs[1]).sum(-1) - gold[rows]) ** 2
            out.append((rows, loss))
        return out
    from core.intervene.measure import Measure
    m = Measure(backend, "mlm", seed)
    for rows, input_ids, mask in m.batches:
        def loss(gates, rows=rows, input_ids=input_ids, mask=mask):
            logp = backend.model.head(gated_forward(encoder, input_ids, mask, gates)).float().log_softmax(-1)
            return torch.stack([-torch.stack([logp[r, p, t] for p, t in m.targets[row]]).mean()
                                for r, row in enumerate(rows)])
        out.append((rows, loss))
    return out


def agreement(gradient: np.ndarray, drop: np.ndarray) -> float:
    """Spearman's rank correlation of I_h with the measured drop, over every head."""
    return float(spearman(np.asarray(gradient).ravel(), np.asarray(drop).ravel()))
