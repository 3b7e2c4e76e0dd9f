"""Training text: read a corpus, split off a held-out part, turn sentences into padded batches.

A corpus file is one of (stores are read by index.corpus.door.read_training_corpus, which the
training command and panel hand to the Trainer)
- ``.txt``: one sentence per line; prose wrapped across lines (paragraphs separated by blank
  lines) is joined and cut into sentences;
- ``.csv`` / ``.tsv``: the ``text`` (or ``sentence``, ``content``, ``body``) column; without one,
  every column whose values look like text (``a`` and ``b`` of a pairs file, say);
- ``.jsonl``: one JSON object per line with a ``text`` (or ``sentence``) field, or a JSON string.
Files are read by core.readers (its rules: encodings, binary files refused, ...).

Sentences are stripped, empty ones dropped and exact duplicates kept once (a duplicate in both
the training and held-out parts would make the held-out numbers look better than they are).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from core.errors import InputError

STORE_DB = "store.db"
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_TERMINAL = re.compile(r"[.!?:;\"')\]]$")
LONG_LINE = 600          # characters: a longer line is cut into sentences


def read_corpus(source: str | Path, limit: int | None = None, encoding: str | None = None) -> list[str]:
    """The sentences of a .txt/.csv/.tsv/.jsonl file (read by core.readers, in ``encoding`` when
    it is not UTF-8), de-duplicated, in file order. Stores are read by
    index.corpus.door.read_training_corpus, which the training command and panel give the Trainer."""
    path = Path(source).expanduser()
    if not path.exists():
        raise InputError(f"corpus {str(source)!r} does not exist (give a .txt/.csv/.jsonl file or a store folder)")
    if path.is_dir():
        raise InputError(f"{path} is a folder but not a store (no {STORE_DB}); give a store folder or a text file")
    else:
        texts = _read_file(path, encoding)
    return dedupe_sentences(texts, limit, path)


def _read_file(path: Path, encoding: str | None) -> list[str]:
    """A corpus file's sentences; any unreadable line stops training (a corpus is read whole),
    one that is not in the encoding with a hint to give another."""
    from core.files.text_file import OTHER_ENCODING
    from core.readers import TEXT_SUFFIXES, BadLine, Blank, NoLetters, read_file
    lines = []
    for rec in read_file(path, encoding=encoding, guess_columns=True):
        if isinstance(rec, BadLine):
            raise InputError(f"{path} line {rec.row}: {rec.reason}",
                             fix=OTHER_ENCODING if rec.undecodable and encoding is None else None)
        # Blank and symbol-only lines end a paragraph of wrapped prose (split_text).
        lines.append("" if isinstance(rec, (Blank, NoLetters)) else rec.text)
    if path.suffix.lower() in TEXT_SUFFIXES:
        return split_text("\n".join(lines))
    return lines


def dedupe_sentences(texts, limit, where) -> list[str]:
    """Trimmed (inner whitespace collapsed), empty ones dropped, each kept once, at most `limit`."""
    seen, out = set(), []
    for t in texts:
        t = " ".join(str(t).split())
        if t and t not in seen:
            seen.add(t)
            out.append(t)
            if limit and len(out) >= limit:
                break
    if not out:
        raise InputError(f"corpus {where} holds no sentences")
    return out


def split_text(raw: str) -> list[str]:
    """Plain text -> sentences. One sentence per line, unless the lines look like wrapped prose."""
    lines = raw.splitlines()
    stripped = [l.strip() for l in lines]
    content = [l for l in stripped if l]
    # A wrapped line: no closing punctuation, and the next line carries on in lower case. Lines
    # of short lower-case sentences look so too: wrapped prose also ends a sentence inside a line.
    wrapped = sum(1 for a, b in zip(stripped, stripped[1:])
                  if a and b and not _TERMINAL.search(a) and b[0].islower())
    ends_inside = any(_SENTENCE_END.search(line) for line in content)
    if content and wrapped > 0.2 * len(content) and ends_inside:
        blocks, cur = [], []
        for l in stripped:
            if l:
                cur.append(l)
            elif cur:
                blocks.append(" ".join(cur))
                cur = []
        if cur:
            blocks.append(" ".join(cur))
        return [s for b in blocks for s in _SENTENCE_END.split(b)]
    out = []
    for l in content:
        out.extend(_SENTENCE_END.split(l) if len(l) > LONG_LINE else [l])
    return out


def split_heldout(sentences: list[str], fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """(train, held-out): a seeded random ``fraction`` held out (at least 1 when asked for any)."""
    if not 0 <= fraction < 1:
        raise InputError(f"held-out fraction must be in [0, 1), not {fraction}")
    n = len(sentences)
    k = 0 if fraction == 0 else max(1, int(round(n * fraction)))
    if n - k < 1:
        raise InputError(f"the corpus has {n} sentence(s): too few to train on and hold some out")
    order = np.random.default_rng(seed).permutation(n)
    held = set(order[:k].tolist())
    return ([s for i, s in enumerate(sentences) if i not in held],
            [s for i, s in enumerate(sentences) if i in held])


def encode(tokenizer, sentences: list[str], max_length: int, batch: int = 2048) -> list[np.ndarray]:
    """Sentences -> token id arrays with [CLS] ... [SEP], cut to ``max_length`` tokens."""
    out = []
    for i in range(0, len(sentences), batch):
        enc = tokenizer(sentences[i:i + batch], truncation=True, max_length=max_length,
                        add_special_tokens=True)
        out.extend(np.asarray(ids, dtype=np.int64) for ids in enc["input_ids"])
    return out


def collate(seqs: list[np.ndarray], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A list of id arrays -> (input_ids (B, T), attention_mask (B, T)), right-padded."""
    T = max(len(s) for s in seqs)
    ids = np.full((len(seqs), T), pad_id, dtype=np.int64)
    mask = np.zeros((len(seqs), T), dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
        mask[i, :len(s)] = 1
    return torch.from_numpy(ids), torch.from_numpy(mask)


class BatchSampler:
    """Endless shuffled batches over a list of sequences, resumable from (epoch, position).

    Epoch e visits the sequences in the order ``default_rng([seed, e]).permutation(n)``; the
    state is two integers, so a resumed run sees exactly the batches the first run would have.
    """

    def __init__(self, n: int, batch_size: int, seed: int, epoch: int = 0, position: int = 0):
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.epoch, self.position = epoch, position
        self._order = self._perm(epoch)

    def _perm(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.n)

    def next(self) -> np.ndarray:
        """The next batch's indices. A batch never spans two epochs, so no sentence appears twice
        in it (for contrastive training a duplicate would be its own in-batch negative)."""
        size = min(self.batch_size, self.n)
        if self.position + size > self.n:
            self.epoch, self.position = self.epoch + 1, 0
            self._order = self._perm(self.epoch)
        out = self._order[self.position:self.position + size]
        self.position += size
        return out

    def state(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}
