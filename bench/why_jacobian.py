"""Is integrated-Jacobians attribution (Moeller et al., EMNLP 2023) interactive on this CPU?

    .venv/bin/python bench/why_jacobian.py [--tokens 30] [--steps 30]

The exact "Why similar" decomposition (core/evaluate/why.py) needs one forward pass per sentence.
Integrated Jacobians need, per sentence and per integration step, the full Jacobian of the
D-dimensional sentence vector with respect to the T x D input embeddings (D backward passes,
batched here with torch.func.jacrev + vmap). This script times one forward pass (the peer)
and one Jacobian on minilm (transformers' BertModel, mean pooling + L2 norm, inputs_embeds),
then extrapolates to --steps steps for two sentences. The issue's bar: interactive (~2 s).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

BUDGET_S = 2.0


def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=30, help="sentence length in tokens, specials included")
    ap.add_argument("--steps", type=int, default=30, help="integration steps to extrapolate to")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    from torch.func import jacrev
    from transformers import AutoModel

    from core.encoder.sources import resolve

    model = AutoModel.from_pretrained(str(resolve("minilm").folder), attn_implementation="eager").eval()
    torch.manual_seed(0)
    ids = torch.randint(1000, 20000, (1, args.tokens))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        embeds = model.get_input_embeddings()(ids)        # (1, T, D): what the path runs over

    def sentence_vector(x):                                  # x (T, D) -> (D,)
        out = model(inputs_embeds=x[None], attention_mask=mask).last_hidden_state[0]
        v = out.mean(0)
        return v / v.norm()

    with torch.no_grad():
        forward_s = median_time(lambda: sentence_vector(embeds[0]), args.repeat)
    jac = jacrev(sentence_vector, chunk_size=64)
    jac_s = median_time(lambda: jac(embeds[0]), max(1, args.repeat - 1))
    total = jac_s * args.steps * 2
    print(f"machine: {platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"minilm, {args.tokens} tokens: one forward {forward_s * 1000:.0f} ms (the exact decomposition's cost)")
    print(f"one Jacobian (384 x {args.tokens} x 384): {jac_s:.2f} s = {jac_s / forward_s:.0f} x a forward")
    print(f"integrated Jacobians, {args.steps} steps x 2 sentences: ~{total:.0f} s "
          f"({'within' if total <= BUDGET_S else 'over'} the {BUDGET_S:.0f} s interactive budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
