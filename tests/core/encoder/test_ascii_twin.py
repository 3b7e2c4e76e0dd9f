"""core/encoder/ascii_twin.py: the plain-text twin gives exactly the ids and cuts of transformers'
tokenizer (the independent reference) for every text, plain or not, in any mix and order; and
it is not used for a pipeline it cannot prove exact."""
from __future__ import annotations

import json
import string

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.encoder import ascii_twin, word_cache
from core.encoder import tokenizer as tk
from core.encoder.sources import resolve
from tests.support.tiny_models import WORDS, make_tiny_bert, write_vocab

MAX = 64            # a short max_length, so that generated texts are cut too


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture(scope="module")
def cased(tmp_path_factory):
    """A cased BERT tokenizer (its normaliser keeps case: the twin has no normaliser)."""
    from transformers import BertTokenizerFast
    folder = tmp_path_factory.mktemp("cased")
    BertTokenizerFast(vocab=str(write_vocab(folder)), do_lower_case=False).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_distilbert, cased):
    return {"minilm": resolve("minilm").folder, "distilbert": tiny_distilbert,
            "vocab_only": _vocab_only(tmp_path_factory), "cased": cased}


def _vocab_only(factory):
    folder = make_tiny_bert(factory.mktemp("vocab_only"))
    (folder / "tokenizer.json").unlink()
    return folder


def mixed_texts(n: int, seed: int) -> list[str]:
    """Sentences of vocabulary words, odd cases, digits, every ASCII punctuation mark and runs of
    spaces; some with a tab, newline, control character, accent or CJK character (not plain),
    and some long enough to be cut at MAX."""
    rng = np.random.default_rng(seed)
    odd = ["\t", "\n", "\r", "\x0b", "\x0c", "\x07", "\x7f", "é", "東", "\u00a0", "\u200b", "🙂"]
    specials = ["[MASK]", "[mask]", "[CLS]", "[SEP]", "[PAD]", "[UNK]"]
    out = []
    for _ in range(n):
        words = []
        for _ in range(int(rng.integers(0, 90 if rng.random() < 0.1 else 20))):
            r = rng.random()
            if r < 0.6:
                w = str(rng.choice(WORDS))
                w = w.upper() if rng.random() < 0.1 else w.capitalize() if rng.random() < 0.2 else w
            elif r < 0.75:
                w = "".join(rng.choice(list(string.punctuation), size=int(rng.integers(1, 4))))
            elif r < 0.85:
                w = str(int(rng.integers(0, 10**6)))
            elif r < 0.9:
                w = str(rng.choice(specials))
            else:
                w = "".join(rng.choice(list(string.ascii_letters), size=int(rng.integers(1, 130))))
            words.append(w)
        glue = " " * int(rng.integers(1, 3))
        text = glue.join(words)
        if rng.random() < 0.15:
            at = int(rng.integers(0, len(text) + 1))
            text = text[:at] + str(rng.choice(odd)) + text[at:]
        out.append(text)
    return out


@pytest.fixture(params=[True, False], ids=["word cache", "twin alone"])
def words(request, monkeypatch):
    """Both of the twin's paths, whichever this machine's CPU count would pick."""
    monkeypatch.setattr(word_cache, "worth_it", lambda: request.param)
    return request.param


@pytest.mark.parametrize("kind", ["minilm", "distilbert", "vocab_only", "cased"])
def test_the_twin_gives_transformers_ids_for_a_mixed_corpus(folders, data_dir, kind, words, monkeypatch):
    mt = tk.ModelTokenizer(folders[kind], MAX)
    texts = mixed_texts(3000, seed=len(kind))
    reference = mt._encode_hf(texts)
    calls = []
    twin_encode = ascii_twin.AsciiTwin._twin_encode
    monkeypatch.setattr(ascii_twin.AsciiTwin, "_twin_encode",
                        lambda self, t: calls.append(len(t)) or twin_encode(self, t))
    got_ids, got_cut = [], []
    for s in range(0, len(texts), 500):
        ids, cut = mt.encode(texts[s:s + 500])
        got_ids += ids
        got_cut += [s + i for i in cut]
    assert mt._twin, "the twin should be built for this BERT pipeline"
    assert (mt._twin.words is not None) == words
    assert sum(calls) > 2000, "most texts are plain: the twin should have taken them"
    assert sum(ascii_twin.is_plain(t) for t in texts) < len(texts), "the corpus must mix kinds"
    assert (got_ids, got_cut) == reference
    assert len(reference[1]) > 50, "long texts must have been cut"


PLAIN = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=200)
ANY = st.one_of(PLAIN, st.text(max_size=60))


@pytest.fixture(scope="module")
def minilm_toks(folders):
    """minilm's tokenizer with its twin built, with the word cache and without."""
    out = {}
    for cached in (True, False):
        mt = tk.ModelTokenizer(folders["minilm"], MAX)
        mt._twin = ascii_twin.twin_of(mt._pipeline, tk.CHECK_TEXTS, words=cached)
        assert (mt._twin.words is not None) == cached
        out[cached] = mt
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(ANY, min_size=tk.TWIN_FROM, max_size=tk.TWIN_FROM + 8), st.booleans())
def test_any_window_tokenises_as_transformers_does(minilm_toks, texts, cached):
    mt = minilm_toks[cached]
    assert mt.encode(texts) == mt._encode_hf(texts)


def test_plain_is_printable_ascii_only():
    assert ascii_twin.is_plain("Hello, world! (1) ~_~ [MASK]") and ascii_twin.is_plain("")
    for odd in ("\t", "\n", "\r", "\x00", "\x7f", "é", "\u00a0", "🙂"):
        assert not ascii_twin.is_plain(f"a{odd}b")


def _pipeline(folders, kind="minilm"):
    return tk.ModelTokenizer(folders[kind], MAX)._pipeline


@pytest.mark.parametrize("cached", [True, False], ids=["word cache", "twin alone"])
def test_the_truncation_side_is_copied(folders, cached):
    from tokenizers import Tokenizer
    pipeline = Tokenizer.from_str(_pipeline(folders, "distilbert").to_str())   # every word one token
    pipeline.enable_truncation(max_length=MAX, direction="left")
    twin = ascii_twin.twin_of(pipeline, words=cached)
    texts = [" ".join(WORDS[:MAX + 10]), "a short one"] * 40
    assert twin is not None and twin.twin.truncation["direction"] == "left"
    assert (twin.words is not None) == cached
    ids, cut = twin.encode(texts)
    assert (ids, cut) == ascii_twin.pipeline_encode(pipeline, texts)
    vocab = pipeline.get_vocab()
    kept = WORDS[10:MAX + 10][-(MAX - 2):]          # the last MAX - 2 words: cut from the left
    assert ids[0] == [vocab["[CLS]"], *(vocab[w] for w in kept), vocab["[SEP]"]]
    assert cut == list(range(0, len(texts), 2))


def test_a_bert_processing_template_has_a_twin_too(folders):
    """Older BERT tokenizer files carry BertProcessing rather than TemplateProcessing."""
    from tokenizers import Tokenizer, processors
    pipeline = Tokenizer.from_str(_pipeline(folders).to_str())
    vocab = pipeline.get_vocab()
    pipeline.post_processor = processors.BertProcessing(("[SEP]", vocab["[SEP]"]), ("[CLS]", vocab["[CLS]"]))
    pipeline.enable_truncation(max_length=MAX)
    twin = ascii_twin.twin_of(pipeline)
    texts = mixed_texts(300, seed=7)
    assert twin is not None and (twin.first, twin.last) == (vocab["[CLS]"], vocab["[SEP]"])
    assert twin.encode(texts) == ascii_twin.pipeline_encode(pipeline, texts)


def test_no_twin_for_another_normaliser_or_template(folders):
    from tokenizers import Tokenizer, normalizers, processors
    pipeline = Tokenizer.from_str(_pipeline(folders).to_str())
    pipeline.enable_truncation(max_length=MAX)
    assert ascii_twin.twin_of(pipeline) is not None
    other = Tokenizer.from_str(pipeline.to_str())
    other.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    assert ascii_twin.twin_of(other) is None
    other = Tokenizer.from_str(pipeline.to_str())
    other.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP] [SEP]", special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    assert ascii_twin.twin_of(other) is None
    other = Tokenizer.from_str(pipeline.to_str())
    other.post_processor = None
    assert ascii_twin.twin_of(other) is None
    untruncated = Tokenizer.from_str(pipeline.to_str())
    untruncated.no_truncation()
    assert ascii_twin.twin_of(untruncated) is None


def test_a_twin_that_tokenises_a_check_text_differently_is_not_used(folders, monkeypatch, caplog):
    from tokenizers import Tokenizer, normalizers
    pipeline = Tokenizer.from_str(_pipeline(folders).to_str())
    pipeline.enable_truncation(max_length=MAX)
    # a "lowercase" that also turns every ~ into a space: only the check texts can see it
    real = normalizers.Lowercase
    monkeypatch.setattr(normalizers, "Lowercase",
                        lambda: normalizers.Sequence([normalizers.Replace("~", " "), real()]))
    assert ascii_twin.twin_of(pipeline) is None
    assert "tokenises a check text differently" in caplog.text


def test_encode_keeps_the_pipeline_for_small_calls_and_builds_the_twin_once(folders, data_dir):
    mt = tk.ModelTokenizer(folders["minilm"], MAX)
    mt.encode(["one text"] * (tk.TWIN_FROM - 1))
    assert mt._twin is None, "a query's few texts should not pay for building the twin"
    mt.encode(["one text"] * tk.TWIN_FROM)
    first = mt._twin
    assert first
    mt.encode(["one text"])
    assert mt._twin is first


@settings(max_examples=300, deadline=None)
@given(st.one_of(PLAIN, st.text(alphabet=" .a_Z9!'-[]", max_size=40)))
def test_the_ascii_split_gives_the_bert_pre_tokenizers_pieces(text):
    """Pieces and their offsets, against the BertPreTokenizer itself, on any printable ASCII."""
    from tokenizers import Regex, pre_tokenizers
    split = pre_tokenizers.Split(Regex(ascii_twin.ASCII_BERT_PIECES), "removed", invert=True)
    assert split.pre_tokenize_str(text) == pre_tokenizers.BertPreTokenizer().pre_tokenize_str(text)


def test_the_twin_splits_by_regex_only_where_the_pipeline_has_a_bert_pre_tokenizer(folders):
    from tokenizers import Tokenizer, pre_tokenizers
    pipeline = Tokenizer.from_str(_pipeline(folders).to_str())
    pipeline.enable_truncation(max_length=MAX)
    texts = mixed_texts(300, seed=11)
    twin = ascii_twin.twin_of(pipeline)
    assert twin is not None and json.loads(twin.twin.to_str())["pre_tokenizer"]["type"] == "Split"
    assert twin.encode(texts) == ascii_twin.pipeline_encode(pipeline, texts)
    # another pre-tokenizer (whitespace only: "a.b" stays one piece) is the twin's own too
    other = Tokenizer.from_str(pipeline.to_str())
    other.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    twin = ascii_twin.twin_of(other)
    assert twin is not None and json.loads(twin.twin.to_str())["pre_tokenizer"] == {"type": "WhitespaceSplit"}
    assert twin.encode(texts) == ascii_twin.pipeline_encode(other, texts)
    assert twin.encode(texts) != ascii_twin.pipeline_encode(pipeline, texts)
