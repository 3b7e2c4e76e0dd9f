"""core/encoder/word_cache.py: the twin's word cache gives the pipeline's ids and cuts exactly (the
pipeline itself, and transformers' tokenizer in test_ascii_twin.py, are the references), also for
added tokens that span words, past its size limit and from several threads at once; it is not
used where a word's ids could depend on its neighbours; and it is chosen by the CPU count."""
from __future__ import annotations

import threading

import pytest

from core.encoder import ascii_twin, word_cache
from core.encoder import tokenizer as tk
from core.encoder.sources import resolve
from tests.core.encoder.test_ascii_twin import mixed_texts

MAX = 64


@pytest.fixture(scope="module")
def minilm_pipeline():
    from tokenizers import Tokenizer
    pipeline = Tokenizer.from_str(tk.ModelTokenizer(resolve("minilm").folder, MAX)._pipeline.to_str())
    pipeline.enable_truncation(max_length=MAX)
    return pipeline


def plain(texts):
    return [t for t in texts if ascii_twin.is_plain(t)]


class Counting:
    """The cache's tokenizer for whole words, counting the words it is asked for."""

    def __init__(self, whole):
        self.whole, self.asked = whole, []

    def encode_batch_fast(self, words, add_special_tokens):
        self.asked += words
        return self.whole.encode_batch_fast(words, add_special_tokens=add_special_tokens)


def test_words_seen_before_are_looked_up_not_tokenised(minilm_pipeline):
    twin = ascii_twin.twin_of(minilm_pipeline, words=True)
    counting = twin.words.whole = Counting(twin.words.whole)
    twin.words.words.clear()            # the check texts' words
    texts = ["The cat sat on the mat.", "the CAT, the mat", "A dog (1) sat!"]
    assert twin.encode(texts) == ascii_twin.pipeline_encode(minilm_pipeline, texts)
    assert sorted(counting.asked) == sorted({"the", "cat", "sat", "on", "mat.", "cat,", "mat", "a",
                                             "dog", "(1)", "sat!"})
    counting.asked.clear()
    again = ["the mat.", "The cat sat on the mat, twice"]
    assert twin.encode(again) == ascii_twin.pipeline_encode(minilm_pipeline, again)
    assert sorted(counting.asked) == ["mat,", "twice"]


def test_a_window_with_an_added_token_goes_to_the_twin_itself(minilm_pipeline):
    """Added tokens are matched before the words are split, even across a space ("new york")."""
    from tokenizers import AddedToken, Tokenizer
    pipeline = Tokenizer.from_str(minilm_pipeline.to_str())
    pipeline.add_tokens([AddedToken("new york", normalized=True), AddedToken("zzq", normalized=False)])
    twin = ascii_twin.twin_of(pipeline, words=True)
    assert twin is not None and twin.words is not None
    window = ["I live in New York now.", "a [MASK] here", "abczzqdef", "nothing added", "new  york"]
    assert twin.encode(window * 3) == ascii_twin.pipeline_encode(pipeline, window * 3)
    _, _, held = twin.words.encode(window * 3)
    assert held == [0, 1, 2, 5, 6, 7, 10, 11, 12]
    new_york = pipeline.get_vocab()["new york"]
    assert new_york in twin.encode(["I live in New York now."])[0][0]


def test_past_its_limit_the_cache_starts_again_and_stays_exact(minilm_pipeline, monkeypatch):
    monkeypatch.setattr(word_cache, "MAX_WORDS", 60)
    twin = ascii_twin.twin_of(minilm_pipeline, words=True)
    texts = plain(mixed_texts(600, seed=5))
    counting = twin.words.whole = Counting(twin.words.whole)
    largest = held = 0
    for s in range(0, len(texts), 20):
        window = texts[s:s + 20]
        assert twin.encode(window) == ascii_twin.pipeline_encode(minilm_pipeline, window)
        largest = max(largest, len(twin.words.words))
        counting.asked.clear()
        held += len(twin.words.encode(window)[2])
        assert not counting.asked, "a window's words should be kept, also right after a restart"
    assert held < len(texts) / 2, "most texts should have been the cache's"
    words_in_a_window = max(len({w for t in texts[s:s + 20] for w in t.lower().split()})
                            for s in range(0, len(texts), 20))
    assert largest <= 60 + words_in_a_window


def test_threads_sharing_the_cache_get_exact_ids(minilm_pipeline, monkeypatch):
    monkeypatch.setattr(word_cache, "MAX_WORDS", 200)       # restarts while others read
    twin = ascii_twin.twin_of(minilm_pipeline, words=True)
    texts = plain(mixed_texts(1200, seed=9))
    expected = ascii_twin.pipeline_encode(minilm_pipeline, texts)
    wrong = []

    def work(offset):
        for s in range(offset, len(texts), 40):
            got = twin.encode(texts[s:s + 40])
            want = ascii_twin.pipeline_encode(minilm_pipeline, texts[s:s + 40])
            if got != want:
                wrong.append(s)

    threads = [threading.Thread(target=work, args=(k * 10,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
    assert twin.encode(texts) == expected


def test_no_cache_where_a_words_ids_could_depend_on_its_neighbours(minilm_pipeline):
    from tokenizers import Tokenizer, pre_tokenizers
    texts = plain(mixed_texts(300, seed=3))
    # Metaspace keeps each space as part of the next piece: a word is not tokenised on its own
    meta = Tokenizer.from_str(minilm_pipeline.to_str())
    meta.pre_tokenizer = pre_tokenizers.Metaspace()
    twin = ascii_twin.twin_of(meta, words=True)
    assert twin is not None and twin.words is None
    assert twin.encode(texts) == ascii_twin.pipeline_encode(meta, texts)
    # WhitespaceSplit drops the spaces: the cache is exact there
    ws = Tokenizer.from_str(minilm_pipeline.to_str())
    ws.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    twin = ascii_twin.twin_of(ws, words=True)
    assert twin is not None and twin.words is not None
    assert twin.encode(texts) == ascii_twin.pipeline_encode(ws, texts)


def test_a_cased_twin_keeps_case_in_its_words(tmp_path):
    from tokenizers import Tokenizer
    from transformers import BertTokenizerFast

    from tests.support.tiny_models import write_vocab
    BertTokenizerFast(vocab=str(write_vocab(tmp_path)), do_lower_case=False).save_pretrained(str(tmp_path))
    pipeline = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    pipeline.enable_truncation(max_length=MAX)
    twin = ascii_twin.twin_of(pipeline, words=True)
    assert twin is not None and twin.words is not None and not twin.words.lowercase
    texts = ["the cat", "The Cat", "THE CAT", "the cat"]
    ids, _ = twin.encode(texts)
    assert (ids, _) == ascii_twin.pipeline_encode(pipeline, texts)
    assert ids[0] == ids[3] != ids[1]
    assert {"the", "The", "THE"} <= set(twin.words.words)


@pytest.mark.parametrize("cpus, cached", [(1, True), (2, True), (3, False), (16, False)])
def test_the_cache_is_used_where_the_process_has_few_cpus(minilm_pipeline, monkeypatch, cpus, cached):
    monkeypatch.setattr(word_cache, "usable_cpus", lambda: cpus)
    assert word_cache.worth_it() is cached
    twin = ascii_twin.twin_of(minilm_pipeline)
    assert (twin.words is not None) is cached


def test_usable_cpus_is_the_affinity_where_there_is_one(monkeypatch):
    import os

    from core.files import platform_os
    if hasattr(os, "sched_getaffinity"):
        assert platform_os.usable_cpus() == len(os.sched_getaffinity(0))
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)      # macOS and Windows
    monkeypatch.setattr(os, "cpu_count", lambda: 12)
    assert platform_os.usable_cpus() == 12
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert platform_os.usable_cpus() == 1
