"""Evaluating a model on a file: graded sentence pairs (Spearman and Pearson of the pairs'
cosines with the scores, anisotropy of the sentences' vectors, before and after whitening), and
reading the files (pairs with a score; queries with their relevant text).

Files are .tsv/.csv with a header read through core.readers.read_table; the columns are found
by their names (PAIR_COLUMNS, SCORE_COLUMNS, QUERY_COLUMNS, RELEVANT_COLUMNS) or named by the
caller (``columns``: "a,b,score" / "query,relevant"). A bad file is one InputError naming the
file, the line and what is wrong, never a partial evaluation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.errors import InputError, settings_fix
from core.evaluate.metrics import Anisotropy, anisotropy, pair_cosines, pearson, spearman
from core.evaluate.whitening import Whitening, fit_whitening
from core.readers import TABLE_SUFFIXES, BadLine, read_table

# Header names recognised without --columns (compared lower-case), in order of preference.
PAIR_COLUMNS = (("a", "b"), ("sentence1", "sentence2"), ("sentence_a", "sentence_b"),
                ("text_a", "text_b"), ("text1", "text2"), ("s1", "s2"))
SCORE_COLUMNS = ("score", "similarity", "gold", "label", "relatedness")
QUERY_COLUMNS = ("query", "question")
RELEVANT_COLUMNS = ("relevant", "expected", "answer", "positive", "text")
EMBED_BATCH = 32


@dataclass
class ScoredPairs:
    """Sentence pairs with a graded similarity score each."""
    a: list              # first sentences
    b: list              # second sentences
    scores: np.ndarray   # (n,) float64 gold scores
    source: str          # the file, for messages

    def __len__(self):
        return len(self.a)

    def sentences(self) -> list:
        """Every distinct sentence of the pairs, in first-seen order."""
        return list(dict.fromkeys(self.a + self.b))


@dataclass(frozen=True)
class PairScores:
    """How well a model's cosines order the pairs as the scores do."""
    n: int                      # pairs
    spearman: float             # rank correlation of cosine and score
    pearson: float              # linear correlation of cosine and score
    anisotropy: Anisotropy      # mean cosine of random pairs of the file's distinct sentences

    def to_dict(self) -> dict:
        return {"n": self.n, "spearman": self.spearman, "pearson": self.pearson,
                "anisotropy": self.anisotropy.value, "anisotropy_pairs": self.anisotropy.pairs,
                "anisotropy_seed": self.anisotropy.seed, "sentences": self.anisotropy.vectors}


@dataclass
class PairsReport:
    """A pairs evaluation: the plain vectors, and the whitened ones when asked for."""
    plain: PairScores
    whitened: PairScores | None = None
    whitening: dict = field(default_factory=dict)   # dims, input_dim, fitted_on (sentences)


# ---- reading ------------------------------------------------------------------------------------
def _column_names(columns, wanted: int, flag_example: str) -> list | None:
    if columns is None:
        return None
    names = [c.strip() for c in (columns.split(",") if isinstance(columns, str) else columns)]
    if len(names) != wanted or not all(names):
        raise InputError(f"the columns are {wanted} names separated by commas, e.g. {flag_example}",
                         fix=settings_fix(columns=None))
    return names


def _find(names: list, candidates, what: str, src: str, remedy: str | None = None, example: str = "") -> int:
    lower = [n.lower() for n in names]
    for c in candidates:
        if c in lower:
            return lower.index(c)
    raise _unnamed(f"{src}: no {what} column (looked for {', '.join(candidates)}; it has "
                   f"{', '.join(names) or 'none'})", remedy, example)


def _unnamed(message: str, remedy: str | None, example: str) -> InputError:
    """Columns not found by their usual names: the caller's remedy, or naming them (the
    columns setting, e.g. `example`)."""
    if remedy is not None:
        return InputError(f"{message}; {remedy}")
    return InputError(f"{message}; name them", fix=settings_fix(columns=example or None))


def _indices(names: list, chosen: list | None, src: str, finders) -> list[int]:
    if chosen is not None:
        missing = [c for c in chosen if c not in names]
        if missing:
            raise InputError(f"{src} has no column '{missing[0]}' (it has: {', '.join(names)})")
        return [names.index(c) for c in chosen]
    return [find(names) for find in finders]


def _rows(path, encoding):
    src = str(path)
    if Path(path).suffix.lower() not in TABLE_SUFFIXES:
        raise InputError(f"{src}: an evaluation file is a .tsv or .csv file with a header line")
    names, rows = read_table(path, encoding)
    return src, names, rows


def _fields(src: str, line: int, row, idx: list[int], names: list) -> list[str]:
    if isinstance(row, BadLine):
        raise InputError(str(row))
    values = []
    for i in idx:
        value = row[i].strip() if i < len(row) else ""
        if not value:
            raise InputError(f"{src}, line {line}: no '{names[i]}' value")
        values.append(value)
    return values


def _pair_columns(names: list, src: str, remedy: str | None) -> list[int]:
    lower = [n.lower() for n in names]
    for a, b in PAIR_COLUMNS:
        if a in lower and b in lower:
            return [lower.index(a), lower.index(b)]
    raise _unnamed(f"{src}: no sentence columns (looked for "
                   f"{', '.join('/'.join(p) for p in PAIR_COLUMNS)}; it has {', '.join(names) or 'none'})",
                   remedy, PAIRS_EXAMPLE)


PAIRS_EXAMPLE = "A,B,SCORE"


def read_scored_pairs(path, columns=None, encoding: str | None = None, remedy: str | None = None) -> ScoredPairs:
    """The pairs of a .tsv/.csv file with two sentence columns and a numeric score column.
    ``remedy``: what a message about unnamed columns tells the user to do (None: name them,
    as a fix the front ends word; a caller that cannot name columns words its own)."""
    src, names, rows = _rows(path, encoding)
    chosen = _column_names(columns, 3, "a,b,score")
    if chosen is None:
        idx = _pair_columns(names, src, remedy) + [_find(names, SCORE_COLUMNS, "score", src, remedy,
                                                         PAIRS_EXAMPLE)]
    else:
        idx = _indices(names, chosen, src, ())
    a, b, scores = [], [], []
    for line, row in rows:
        if not isinstance(row, BadLine) and all(not c.strip() for c in row):
            continue                                    # a blank line
        first, second, score = _fields(src, line, row, idx, names)
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise InputError(f"{src}, line {line}: the score {score[:40]!r} is not a number")
        a.append(first)
        b.append(second)
        scores.append(value)
    if len(a) < 2:
        raise InputError(f"{src}: at least two scored pairs are needed (found {len(a)})")
    if len(set(scores)) < 2:
        raise InputError(f"{src}: every pair has the score {scores[0]:g}; a correlation needs scores that differ")
    return ScoredPairs(a, b, np.asarray(scores, np.float64), src)


def read_queries(path, columns=None, encoding: str | None = None) -> list[tuple[str, str]]:
    """(query, relevant text) rows of a .tsv/.csv file."""
    src, names, rows = _rows(path, encoding)
    chosen = _column_names(columns, 2, "query,relevant")
    idx = _indices(names, chosen, src, (lambda n: _find(n, QUERY_COLUMNS, "query", src),
                                        lambda n: _find(n, RELEVANT_COLUMNS, "relevant text", src)))
    out = []
    for line, row in rows:
        if not isinstance(row, BadLine) and all(not c.strip() for c in row):
            continue
        query, relevant = _fields(src, line, row, idx, names)
        out.append((query, relevant))
    if not out:
        raise InputError(f"{src}: no queries in it")
    return out


# ---- evaluating -----------------------------------------------------------------------------------
def score_pairs(va, vb, gold, sentence_vectors) -> PairScores:
    """PairScores of pair vectors (va[i], vb[i]) against gold scores; anisotropy of
    ``sentence_vectors`` (the file's distinct sentences)."""
    cos = pair_cosines(va, vb)
    return PairScores(len(cos), spearman(cos, gold), pearson(cos, gold), anisotropy(sentence_vectors))


def _embed(backend, texts, pooling, progress, cancel, done: int, total: int) -> np.ndarray:
    step = None if progress is None else (lambda k, _n: progress(done + k, total))
    return np.asarray(backend.embed(texts, pooling=pooling, batch_size=EMBED_BATCH, cancel=cancel,
                                    progress=step), np.float64)


def evaluate_pairs(backend, pairs: ScoredPairs, pooling: str = "mean", *, whiten_corpus=None,
                   whiten_dims: int | None = None, progress=None, cancel=None) -> PairsReport:
    """Score ``backend``'s ``pooling`` vectors on ``pairs``; with ``whiten_corpus`` (sentences)
    also after BERT-whitening fitted on that corpus's vectors (``whiten_dims`` directions).
    progress(done, total) counts sentences embedded; a set ``cancel`` raises Cancelled."""
    texts = pairs.sentences()
    corpus = list(whiten_corpus or [])
    if corpus and whiten_dims is not None and not 1 <= whiten_dims <= backend.dim:
        raise InputError(f"the whitening dimensions must be between 1 and {backend.dim} (the "
                         f"model's width), not {whiten_dims}")
    total = len(texts) + len(corpus)
    vecs = _embed(backend, texts, pooling, progress, cancel, 0, total)
    row = {t: i for i, t in enumerate(texts)}
    ia, ib = [row[t] for t in pairs.a], [row[t] for t in pairs.b]
    report = PairsReport(score_pairs(vecs[ia], vecs[ib], pairs.scores, vecs))
    if corpus:
        w = fit_whitening(_embed(backend, corpus, pooling, progress, cancel, len(texts), total), whiten_dims)
        white = w.apply(vecs)
        report.whitened = score_pairs(white[ia], white[ib], pairs.scores, white)
        report.whitening = describe_whitening(w, len(corpus))
    return report


def describe_whitening(w: Whitening, fitted_on: int) -> dict:
    return {"dims": w.dims, "input_dim": w.input_dim, "fitted_on": fitted_on}
