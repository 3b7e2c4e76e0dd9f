"""The twin's ids of each space-separated word, kept: a plain text's ids are then its words' ids
in turn, looked up, and only words not seen before go through the tokenizer.

On printable ASCII, with a pre-tokenizer that drops the spaces and never makes a piece across
one (BertPreTokenizer, WhitespaceSplit), a text's pieces are its space-separated words' pieces
in turn. WordPiece tokenises each piece on its own. So a word's ids do not depend on the text
around it, and a text's ids (before truncation) are its words' ids joined.

Why, and where: the Rust twin spends ~28 us of CPU on a 23-word sentence, spread over rayon's
threads with the GIL released; the cache ~11 us, most of it in Python with the GIL held (on
prose, 2.5 us against 14, and no more GIL than the twin). On two cores, where the CPU is what
runs out, the ingest pipeline's tokenising then leaves the store its core: the simulated
100,000/s ingest ran 1.25x (1.05-1.43x by the hour; AMD EPYC, 2 cores, bench/ingest_host.py).
On more cores the twin's threads scale and the GIL is the scarcer thing, so the twin uses this
only where the process can run on at most WORD_CACHE_CPUS CPUs.

    cache = WordCache.of(twin, first, last, pipeline_pre_tokenizer)   # None where not exact
    ids, cut, held = cache.encode(texts)   # [first] ids [last] and the cuts, as the twin's; the
                                           # held texts (ids None) are left to the caller
"""
from __future__ import annotations

import json

from core.files.platform_os import usable_cpus

WORD_CACHE_CPUS = 2         # the most CPUs the process may run on for the cache to be used
MAX_WORDS = 50_000          # words kept (10-15 MB); past it the cache starts again
# Pre-tokenizers that drop spaces and never make a piece across one: a text's pieces are then
# its space-separated words' pieces, in turn.
SPACE_SPLITTING = ({"type": "BertPreTokenizer"}, {"type": "WhitespaceSplit"})


def worth_it() -> bool:
    """Is the cache the faster path on this machine (see the module's docstring)?"""
    return usable_cpus() <= WORD_CACHE_CPUS


class WordCache:
    """Ids of a plain text's words, kept across calls; `encode` gives what the twin plus its
    template gives: [first] ids [last], cut as the twin's truncation cuts."""

    def __init__(self, whole, first: int, last: int, max_length: int, left: bool, lowercase: bool,
                 added: list[str]):
        self.whole = whole              # the twin without truncation: a word's ids, whole
        self.first, self.last = first, last
        self.max_length, self.left = max_length, left
        self.lowercase = lowercase
        self.added = added              # added tokens' spellings, lowercased: such texts go back
        self.words: dict[str, tuple[int, ...]] = {}

    @classmethod
    def of(cls, twin, first: int, last: int, pre_tokenizer: dict | None) -> WordCache | None:
        """The cache for the twin, or None where a word's ids could depend on its neighbours
        (another pre-tokenizer or model) or truncation cuts otherwise than at one end.
        pre_tokenizer: the pipeline's, as its JSON has it (the twin's own may be a regex twin
        of it: ascii_twin.ASCII_BERT_PIECES)."""
        from tokenizers import Tokenizer
        spec = json.loads(twin.to_str())
        trunc = twin.truncation
        if pre_tokenizer not in SPACE_SPLITTING:
            return None
        if (spec.get("model") or {}).get("type") != "WordPiece" or not trunc:
            return None
        if trunc["strategy"] not in ("longest_first", "only_first") or trunc.get("stride", 0):
            return None
        norm = spec.get("normalizer")
        if norm not in (None, {"type": "Lowercase"}):
            return None
        whole = Tokenizer.from_str(twin.to_str())
        whole.no_truncation()
        added = [t.content.lower() for t in twin.get_added_tokens_decoder().values()]
        return cls(whole, first, last, trunc["max_length"], trunc["direction"] == "left",
                   norm is not None, [a for a in added if a])

    def encode(self, texts: list[str]) -> tuple[list, list[int], list[int]]:
        """(ids, cut indices, held indices) of plain texts. A held text has None for its ids: it
        holds an added token's spelling, which the tokenizer matches before it splits words
        (even across a space), so the caller tokenises it otherwise."""
        joined = "\n".join(texts)          # one lower() and one split for the window
        low = joined.lower()
        lines = (low if self.lowercase else joined).split("\n")
        if len(lines) != len(texts):
            raise ValueError("the word cache takes plain texts only (no newline)")
        held = []
        if any(a in low for a in self.added):
            held = [i for i, t in enumerate(texts) if any(a in t.lower() for a in self.added)]
            for i in held:
                lines[i] = None
        # Each row is built from the words known; a new word leaves a hole (row, place, word)
        # that is filled once the window's new words are tokenised, in one batch.
        first, last, n, left = self.first, self.last, self.max_length, self.left
        get = self.words.get
        ids, holes = [], []
        for i, line in enumerate(lines):
            if line is None:
                ids.append(None)
                continue
            row = [first]
            for w in line.split():
                got = get(w)
                if got is None:
                    holes.append((i, len(row), w))
                else:
                    row += got
            ids.append(row)
        if holes:
            learned = self._learn({w for _, _, w in holes}, lines)
            for i, at, w in reversed(holes):        # from the end: earlier places stay put
                ids[i][at:at] = learned[w]
        cut = []
        for i, row in enumerate(ids):
            if row is None:
                continue
            if len(row) > n + 1:
                if left:
                    del row[1:len(row) - n]
                else:
                    del row[n + 1:]
                cut.append(i)
            row.append(last)
        return ids, cut, held

    def _learn(self, new: set[str], lines: list) -> dict:
        """The cache with the window's new words in it, tokenised in one batch. Past MAX_WORDS
        it starts again from the window's own words (what comes next likely shares them)."""
        cache = self.words
        if len(cache) + len(new) > MAX_WORDS:
            old, cache = cache, {}
            for line in lines:
                for w in line.split() if line is not None else ():
                    if w in old:
                        cache[w] = old[w]
            self.words = cache      # another thread keeps the dict it holds
        new = list(new)
        for word, enc in zip(new, self.whole.encode_batch_fast(new, add_special_tokens=False)):
            cache[word] = tuple(enc.ids)
        return cache
