"""Which of minilm's heads play the roles Voita et al. (2019) found in the heads that matter:
positional heads (a token's strongest attention goes to its left or right neighbour) and
rare-word heads (a token's strongest attention goes to the sentence's rarest word), measured on
the sample corpus, printed beside the importance maps' drops (from the cache, or computed).

    python bench/intervene_head_roles.py [--sentences 200]

A head counts as positional (or rare-word) when at least 90% (Voita's threshold) of its real,
non-special tokens do so. Word rarity: frequency of the token in the sample corpus itself.
"""
from __future__ import annotations

import argparse
from collections import Counter

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=200)
    args = ap.parse_args()
    from core.encoder.backends import get_backend
    from core.intervene.effects import sample_corpus
    from core.intervene.importance import importance_map
    from core.paths import data_dir
    backend = get_backend("minilm", "scratch", device="cpu")
    texts = sample_corpus()
    counts = Counter(t for text in texts for t in backend.tokenizer.tokenize(text))
    L, H = backend.n_layers, backend.n_heads
    neighbour, rare, n = np.zeros((L, H)), np.zeros((L, H)), 0
    for text in texts[:args.sentences]:
        ins = backend.inspect(text)
        toks = ins.tokens[1:-1]
        if len(toks) < 3:
            continue
        att = ins.attentions[:, :, 1:-1, 1:-1]          # real tokens only, (L, H, T, T)
        strongest = att.argmax(-1)                       # (L, H, T)
        pos = np.arange(len(toks))
        neighbour += (np.abs(strongest - pos) == 1).mean(-1)
        rarest = int(np.argmin([counts[t] for t in toks]))
        rare += (strongest == rarest).mean(-1)
        n += 1
    neighbour, rare = neighbour / n, rare / n
    cache = data_dir() / "cache" / "importance"
    maps = {metric: importance_map(backend, metric, cache_dir=cache) for metric in ("spearman", "recall")}
    print(f"minilm, {n} sentences of the sample corpus; precision {backend.precision}")
    print("head   to-neighbour  to-rarest  spearman drop  recall drop")
    order = sorted(((l, h) for l in range(L) for h in range(H)), key=lambda p: -maps["spearman"].heads[p])
    for l, h in order:
        tag = " positional" if neighbour[l, h] >= 0.9 else " rare-word" if rare[l, h] >= 0.9 else ""
        print(f"{l + 1}.{h + 1:<3} {neighbour[l, h]:>12.2f} {rare[l, h]:>10.2f} {maps['spearman'].heads[l, h]:>+14.4f} "
              f"{maps['recall'].heads[l, h]:>+12.4f}{tag}")
    ranks = {p: r for r, p in enumerate(order, 1)}
    for name, share in (("positional", neighbour), ("rare-word", rare)):
        found = [(l, h) for l in range(L) for h in range(H) if share[l, h] >= 0.9]
        most = sorted(((l, h) for l in range(L) for h in range(H)), key=lambda p: -share[p])[:5]
        print(f"{name} heads (>= 90%): {', '.join(f'{l + 1}.{h + 1}' for l, h in found) or 'none'}; the 5 most "
              f"{name}, with their rank by Spearman drop (1 = matters most, of {L * H}): "
              + ", ".join(f"{l + 1}.{h + 1} {share[l, h]:.2f} #{ranks[(l, h)]}" for l, h in most))


if __name__ == "__main__":
    main()
