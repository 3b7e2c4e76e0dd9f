"""Clusters of the corpus map: k-means on the sentence vectors (faiss.Kmeans, fixed seed), each
cluster named by the words that are over-represented in it compared with the whole corpus.

A word's score in a cluster is p_c * log(p_c / p): p_c the share of the cluster's sentences
that contain it, p the share of all sentences (its term in the KL divergence of the cluster's
word distribution from the corpus's). A word common everywhere scores ~0; a word frequent in the
cluster and rare elsewhere scores highest. Stop words and words under 3 letters are skipped.
"""
from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

KMEANS_ITERATIONS = 25
KMEANS_RESTARTS = 5         # runs from different random starts; the best (tightest) is kept
LABEL_WORDS = 3             # words in a cluster's label
MIN_WORD_LETTERS = 3
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")    # letters, with inner apostrophes

# Common English function words: they say nothing about a topic.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are aren't as at be because been
before being below between both but by can can't cannot could couldn't did didn't do does
doesn't doing don't down during each even ever every few for from further get gets got had
hadn't has hasn't have haven't having he her here hers herself him himself his how however i
if in into is isn't it it's its itself just let's like made make many may me might more most
much must mustn't my myself never no nor not now of off often on once one only or other our
ours ourselves out over own really said same say says she should shouldn't since so some
still such than that that's the their theirs them themselves then there there's these they
this those though through to too two under until up upon us very was wasn't we were weren't
what when where whether which while who whom whose why will with without won't would
wouldn't yet you your yours yourself yourselves
""".split())  # noqa: SIM905 - a word list reads better as text


def kmeans(vectors: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Cluster of each row (n,) int32, numbered by size (0 = largest; ties: smallest first row).

    Spherical k-means (centroids kept at unit length: cosine, like the search)."""
    import faiss

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    n = len(x)
    if k <= 1 or n <= 1:
        return np.zeros(n, np.int32)
    km = faiss.Kmeans(x.shape[1], k, niter=KMEANS_ITERATIONS, nredo=KMEANS_RESTARTS, seed=seed,
                      spherical=True, verbose=False)
    # One OpenMP thread: the job is small (k-means trains on at most 256 points per centroid),
    # and on a busy machine faiss's threads spin-wait for each other: 0.2 s became 5 s at 10k
    # points on 2 shared cores. The setting is per calling thread; it is put back after.
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        km.train(x)
        _, assign = km.index.search(x, 1)
    finally:
        faiss.omp_set_num_threads(threads)
    return renumber_by_size(assign[:, 0])


def renumber_by_size(assign: np.ndarray) -> np.ndarray:
    """Cluster numbers 0.. in order of size, largest first (ties: the earliest row first)."""
    labels, first, counts = np.unique(assign, return_index=True, return_counts=True)
    order = np.lexsort((first, -counts))                 # by size desc, then first row
    new = np.empty(labels.max() + 1, np.int32)
    new[labels[order]] = np.arange(len(order), dtype=np.int32)
    return new[assign]


def words_of(text: str) -> set[str]:
    """The distinct content words of a text: lower case, letters only, no stop words."""
    return {w for w in _WORD.findall(text.lower())
            if len(w) >= MIN_WORD_LETTERS and w not in STOPWORDS}


def distinctive_words(texts, assign: np.ndarray, n_clusters: int,
                      top: int = LABEL_WORDS) -> list[list[str]]:
    """For each cluster 0..n_clusters-1, its `top` most over-represented words (see module)."""
    corpus: Counter = Counter()
    per_cluster = [Counter() for _ in range(n_clusters)]
    for text, c in zip(texts, assign.tolist()):
        words = words_of(text)
        corpus.update(words)
        per_cluster[c].update(words)
    n = max(len(assign), 1)
    sizes = np.bincount(assign, minlength=n_clusters)
    out = []
    for c, counts in enumerate(per_cluster):
        size = max(int(sizes[c]), 1)
        scored = []
        for word, df in counts.items():
            p_c, p = df / size, corpus[word] / n
            scored.append((-(p_c * math.log(p_c / p)), -df, word))
        scored.sort()
        if scored and scored[0][0] >= 0:       # one cluster (or no contrast): most frequent
            scored.sort(key=lambda s: (s[1], s[2]))
        out.append([w for _, _, w in scored[:top]])
    return out
