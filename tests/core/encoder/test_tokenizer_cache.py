"""core/encoder/tokenizer.py: the kept tokenizer pipeline gives exactly transformers' ids, is never
trusted when stale, altered or damaged, and spares a later start the transformers import."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.encoder import tokenizer as tk
from core.encoder.sources import resolve
from core.errors import ModelUnavailable
from tests.support.paths import ROOT, child_env
from tests.support.tiny_models import make_tiny_bert

MAX = 64            # a short max_length, so that generated texts are cut too


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def kept_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "cache" / "tokenizers").glob("*.json"))


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_distilbert):
    """Tokenizers of every kind the app loads: minilm's WordPiece (tokenizer.json), a DistilBERT
    saved by transformers, a BERT folder with vocab.txt only, and a trained word-level one."""
    from core.encoder.wordtok import build_word_tokenizer
    vocab_only = make_tiny_bert(tmp_path_factory.mktemp("vocab_only"))
    (vocab_only / "tokenizer.json").unlink()
    word = tmp_path_factory.mktemp("word")
    build_word_tokenizer(["The cat sat on the mat.", "A dog ran in the park!"] * 3,
                         max_length=MAX).save_pretrained(str(word))
    return {"minilm": resolve("minilm").folder, "distilbert": tiny_distilbert,
            "vocab_only": vocab_only, "word": word}


TEXTS = list(tk.CHECK_TEXTS) + ["The cat sat.", "x", "[MASK] is here", "ünïcödé " * 40]


@pytest.mark.parametrize("kind", ["minilm", "distilbert", "vocab_only", "word"])
def test_the_kept_pipeline_gives_transformers_ids(folders, data_dir, kind):
    first = tk.ModelTokenizer(folders[kind], MAX)
    assert first.loaded and len(kept_files(data_dir)) == 1
    second = tk.ModelTokenizer(folders[kind], MAX)
    assert second.loaded is False, "the second load should not need transformers"
    assert second.max_length == first.max_length and len(second) == len(first.hf)
    assert second.pad_token_id == first.hf.pad_token_id
    ids, cut = second.encode(TEXTS)
    assert (ids, cut) == first._encode_hf(TEXTS)
    assert cut, "the long texts must have been cut"
    assert all(len(x) <= MAX for x in ids)


@pytest.fixture(scope="module")
def minilm_kept(folders):
    kept = tk.ModelTokenizer(folders["minilm"], MAX)
    assert kept._pipeline is not None, "no pipeline: encode() would be the transformers call itself"
    return kept


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=8))
def test_any_text_tokenises_the_same_either_way(minilm_kept, texts):
    """Arbitrary unicode (control characters, surrogates excluded by hypothesis, emoji,
    combining marks) through minilm's kept pipeline and through transformers."""
    assert minilm_kept.encode(texts) == minilm_kept._encode_hf(texts)


def test_a_changed_tokenizer_file_is_a_new_key(folders, data_dir, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(folders["distilbert"], folder)
    tk.ModelTokenizer(folder, MAX)
    before = tk.ModelTokenizer(folder, MAX).encode(["The Cat sat."])
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    cfg["do_lower_case"] = False           # "Cat" is no longer "cat": different ids
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    (folder / "tokenizer.json").unlink()   # rebuilt from vocab.txt with the new setting
    after = tk.ModelTokenizer(folder, MAX)
    assert after.loaded, "a stale pipeline was used"
    assert after.encode(["The Cat sat."]) == after._encode_hf(["The Cat sat."]) != before
    assert len(kept_files(data_dir)) == 2


def test_an_altered_or_damaged_cache_file_is_not_trusted(folders, data_dir):
    folder = folders["minilm"]
    tk.ModelTokenizer(folder, MAX)
    (path,) = kept_files(data_dir)
    rec = json.loads(path.read_text())
    pipeline = json.loads(rec["pipeline"])
    pipeline["normalizer"] = None          # valid JSON, valid pipeline, wrong tokenisation
    rec["pipeline"] = json.dumps(pipeline)
    path.write_text(json.dumps(rec))
    again = tk.ModelTokenizer(folder, MAX)
    assert again.loaded
    assert again.encode(["Café"]) == again._encode_hf(["Café"])
    assert tk.ModelTokenizer(folder, MAX).loaded is False   # written again, intact: used
    rec = json.loads(path.read_text())
    rec["settings"]["size"] = "30522"                     # a settings field damaged, pipeline intact
    path.write_text(json.dumps(rec))
    t = tk.ModelTokenizer(folder, MAX, vocab_size=30522)
    assert t.loaded and len(t) == 30522
    for damage in (b"\x00\xff not json", json.dumps({"format": tk.CACHE_FORMAT}).encode(), b""):
        path.write_bytes(damage)
        t = tk.ModelTokenizer(folder, MAX)
        assert t.loaded and t.encode(["Café"]) == t._encode_hf(["Café"])
    assert tk.ModelTokenizer(folder, MAX).loaded is False, "the rewritten file is used again"


def test_a_pipeline_that_fails_the_check_is_not_kept(folders, data_dir, monkeypatch):
    real = tk.ModelTokenizer._configured

    def off_by_one(self, pipeline):       # a copy that cuts one token earlier than transformers
        real(self, pipeline)
        pipeline.enable_truncation(max_length=self.max_length - 1)
        return pipeline
    monkeypatch.setattr(tk.ModelTokenizer, "_configured", off_by_one)
    t = tk.ModelTokenizer(folders["minilm"], MAX)
    assert t._pipeline is None and kept_files(data_dir) == []
    long = [tk.CHECK_TEXTS[-1]]
    assert t.encode(long) == t._encode_hf(long) and len(t.encode(long)[0][0]) == MAX


def test_only_the_most_recently_used_pipelines_are_kept(folders, data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(tk, "CACHE_KEEP", 2)
    copies = []
    for i in range(3):                     # three folders, three keys (the vocabularies differ)
        folder = tmp_path / f"m{i}"
        shutil.copytree(folders["word"], folder)
        tok = json.loads((folder / "tokenizer.json").read_text())
        tok["model"]["vocab"][f"extra{i}"] = len(tok["model"]["vocab"])
        (folder / "tokenizer.json").write_text(json.dumps(tok))
        copies.append(folder)
    tk.ModelTokenizer(copies[0], MAX)
    tk.ModelTokenizer(copies[1], MAX)
    os.utime(tk.cache_file(tk.cache_key(copies[0])), (1, 1))   # m0 long unused ...
    assert tk.ModelTokenizer(copies[0], MAX).loaded is False           # ... until read again
    tk.ModelTokenizer(copies[2], MAX)                              # a third: m1 goes
    assert len(kept_files(data_dir)) == 2
    assert tk.ModelTokenizer(copies[0], MAX).loaded is False and tk.ModelTokenizer(copies[1], MAX).loaded


def test_an_unwritable_cache_still_loads(folders, data_dir):
    (data_dir / "cache").mkdir(parents=True)
    (data_dir / "cache" / "tokenizers").write_text("a file where the folder would go")
    t = tk.ModelTokenizer(folders["minilm"], MAX)
    assert t.encode(["hello"]) == t._encode_hf(["hello"])


def test_the_size_check_holds_with_a_kept_pipeline(folders, data_dir):
    """minilm's tokenizer for a model with a smaller vocabulary: refused by transformers' load
    and by the kept pipeline's."""
    with pytest.raises(ModelUnavailable, match="belong to different models"):
        tk.ModelTokenizer(folders["minilm"], MAX, vocab_size=1000)
    tk.ModelTokenizer(folders["minilm"], MAX)
    assert len(kept_files(data_dir)) == 1
    with pytest.raises(ModelUnavailable, match="30,522 tokens but the model's vocabulary has 1,000"):
        tk.ModelTokenizer(folders["minilm"], MAX, vocab_size=1000)


def test_a_second_start_embeds_without_transformers(tmp_path):
    """Two fresh processes: the second embeds a query without importing transformers, to the
    same vector; asking for the transformers tokenizer afterwards still works."""
    code = ("import sys, json; from core.encoder.backends import get_backend\n"
            "b = get_backend('minilm', precision='fp32')\n"
            "v = b.embed(['A storm is coming, said the old fisherman.'])[0]\n"
            "had = 'transformers' in sys.modules\n"
            "n = len(b.tokenizer)\n"
            "print(json.dumps({'had': had, 'v': v.tolist(), 'n': n}))\n")
    env = child_env(ENCODERSCOPE_DATA_DIR=str(tmp_path / "data"))
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                                      text=True, check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert runs[0]["had"] and not runs[1]["had"]
    assert runs[0]["v"] == runs[1]["v"] and runs[0]["n"] == runs[1]["n"]


# ---- the cache is data: only its own files, never through a link, never a hang -----------------


def test_pruning_deletes_only_this_caches_own_files_never_through_a_linked_folder(folders, data_dir, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setattr(tk, "CACHE_KEEP", 1)
    users = tmp_path / "users_json"
    users.mkdir()
    for i in range(6):                        # a user's files, some with names like the cache's
        name = f"{i:032x}.json" if i % 2 else f"notes{i}.json"
        (users / name).write_text(json.dumps({"mine": i}))
        os.utime(users / name, (1, 1))        # older than anything the cache writes
    (data_dir / "cache").mkdir(parents=True)
    (data_dir / "cache" / "tokenizers").symlink_to(users, target_is_directory=True)
    tk.ModelTokenizer(folders["minilm"], MAX)
    tk.ModelTokenizer(folders["word"], MAX)       # a second key: one beyond CACHE_KEEP
    assert {p.name for p in users.iterdir()} >= {f"{i:032x}.json" if i % 2 else f"notes{i}.json" for i in range(6)}
    # in the cache's own (real) folder too: a user's file named like a cache file is not one
    (data_dir / "cache" / "tokenizers").unlink()
    folder = data_dir / "cache" / "tokenizers"
    folder.mkdir()
    stranger = folder / ("f" * 32 + ".json")
    stranger.write_text(json.dumps({"format": "someone else's"}))
    other = folder / "settings.json"
    other.write_text("{}")
    os.utime(stranger, (1, 1))
    os.utime(other, (1, 1))
    tk.ModelTokenizer(folders["minilm"], MAX)
    tk.ModelTokenizer(folders["word"], MAX)
    ours = [p for p in folder.glob("*.json") if p not in (stranger, other)]
    assert stranger.exists() and other.exists() and len(ours) == 1     # the older of its own went


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_a_fifo_in_place_of_a_kept_pipeline_never_hangs_the_load(folders, data_dir):
    import threading
    path = tk.cache_file(tk.cache_key(folders["minilm"]))
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    done = []
    t = threading.Thread(target=lambda: done.append(tk.ModelTokenizer(folders["minilm"], MAX)), daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():                          # unblock the reader before failing
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        t.join(10)
        pytest.fail("a FIFO in the tokenizer cache blocked the load")
    assert done and done[0].loaded          # read from transformers, the FIFO left alone
    assert done[0].encode(["hello"]) == done[0]._encode_hf(["hello"])


def test_a_killed_writers_temporary_is_removed_on_the_next_write(folders, data_dir):
    path = tk.cache_file(tk.cache_key(folders["minilm"]))
    path.parent.mkdir(parents=True)
    stale = path.parent / f".{path.name}.0123456789ab.tmp"
    stale.write_text("half a pipeline")
    os.utime(stale, (1, 1))
    fresh = path.parent / f".{path.name}.ba9876543210.tmp"    # another writer at work now
    fresh.write_text("")
    tk.ModelTokenizer(folders["minilm"], MAX)
    assert path.is_file() and not stale.exists() and fresh.exists()


def test_the_sample_corpus_and_ingests_mixed_sentences_tokenise_the_same_either_way(minilm_kept):
    """What ingest tokenises (the kept Rust pipeline's batch encoder) gives transformers' ids on
    the sample corpus, the benchmark's joined sentences, and odd inputs, in one batch."""
    corpus = [s for s in (ROOT / "assets" / "sample_corpus.txt").read_text(encoding="utf-8").splitlines() if s]
    joined = [" ".join(corpus[i:i + 3]) + f" ({i})" for i in range(0, len(corpus), 7)]
    odd = [" ", "\u200b", "a" * 5000, "word " * 400, "\t\n", "🙂" * 70, "[SEP] [CLS]", "ß" * 3]
    texts = corpus + joined + odd
    ids, cut = minilm_kept.encode(texts)
    assert (ids, cut) == minilm_kept._encode_hf(texts)
    assert len(ids) == len(texts) and cut
