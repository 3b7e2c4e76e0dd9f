"""bench/ingest_host.py: its tokenising-paths rows run both of the twin's paths on both corpora,
and it names the path the ingest rows took."""
from __future__ import annotations

import re

from bench import ingest_host
from core.encoder import ascii_twin, word_cache


def test_tokenise_paths_times_both_paths_on_both_corpora():
    out = ingest_host.tokenise_paths("minilm", 300, rounds=1)
    assert len(re.findall(r"^ {4}twin alone .*/s .*us/text .*us/text$", out, re.M)) == 2
    assert len(re.findall(r"^ {4}word cache .*/s .*us/text .*us/text$", out, re.M)) == 2
    assert re.search(r"sample corpus, numbered: 2\d\d texts", out) and "pydoc prose (" in out


def test_prose_is_plain_english_with_repeats():
    texts, distinct = ingest_host.prose(2000)
    assert len(texts) == 2000 and distinct > 1000
    assert all(ascii_twin.is_plain(t) and len(t.split()) >= 4 for t in texts)
    assert len(set(texts)) < 2000


def test_the_tokenising_path_is_named(monkeypatch):
    from core.encoder.backends import get_backend
    backend = get_backend("minilm", "scratch", device="cpu", precision="fp32")
    for cached, name in ((True, "the twin's word cache"), (False, "the twin's Rust threads")):
        monkeypatch.setattr(word_cache, "worth_it", lambda cached=cached: cached)
        backend.model_tokenizer._twin = None
        backend.model_tokenizer.encode(["a plain sentence"] * 64)
        assert ingest_host.tokenising_path(backend).startswith(name)
