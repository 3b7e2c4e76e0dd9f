"""Training: masking recipe, corpus reading, MLM learns, checkpoints reload, resume, cancel."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from core.encoder.weights import load_folder
from core.encoder.wordtok import SPECIALS, build_word_tokenizer
from core.errors import InputError
from core.train.checkpoint import STATE_JSON, STATE_TENSORS, atomic_folder, recover
from core.train.config import TrainConfig
from core.train.data import BatchSampler, read_corpus, split_heldout, split_text
from core.train.masking import IGNORE, mask_tokens, special_mask
from core.train.trainer import Trainer
from tests.support.bf16 import needs_cpu_bf16
from tests.support.train_corpus import tiny_config, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "gen.txt")


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """One 300-step MLM run shared by several tests: (summary, events, out folder, model)."""
    out = tmp_path_factory.mktemp("runs") / "mlm"
    events = []
    trainer = Trainer(tiny_config(corpus, out))
    summary = trainer.run(progress=events.append)
    # the in-memory model too, to compare with the saved one
    return summary, events, out, trainer.model.eval()


# ---- pieces ------------------------------------------------------------------------------


def test_word_tokenizer_roundtrip(tmp_path):
    from transformers import AutoTokenizer

    tok = build_word_tokenizer(["The cat sat on the mat.", "A dog ran, quickly!"], max_length=32)
    assert tok.convert_ids_to_tokens(list(range(5))) == SPECIALS
    enc = tok("The cat [MASK] on a zebra.")
    assert tok.convert_ids_to_tokens(enc["input_ids"]) == \
        ["[CLS]", "the", "cat", "[MASK]", "on", "a", "[UNK]", ".", "[SEP]"]
    tok.save_pretrained(str(tmp_path))
    again = AutoTokenizer.from_pretrained(str(tmp_path))
    assert again("the dog ran!")["input_ids"] == tok("the dog ran!")["input_ids"]
    assert (again.mask_token_id, again.pad_token_id, again.model_max_length) == (4, 0, 32)


def test_masking_recipe():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (400, 50))
    ids[:, 0], ids[:, -1] = 2, 3                        # [CLS] ... [SEP]
    special = special_mask(ids, [0, 1, 2, 3, 4])
    inputs, labels = mask_tokens(ids, special, mask_id=4, vocab_size=1000, prob=0.15, generator=g,
                                 random_ids=torch.arange(5, 1000))
    picked = labels != IGNORE
    assert not picked[special].any()                    # specials never picked
    rate = picked.sum().item() / (~special).sum().item()
    assert 0.14 < rate < 0.16
    assert torch.equal(labels[picked], ids[picked])     # labels are the originals
    masked = (inputs == 4) & picked
    kept = (inputs == ids) & picked
    randomised = picked & ~masked & ~kept
    n = picked.sum().item()
    assert abs(masked.sum().item() / n - 0.8) < 0.03
    assert abs(kept.sum().item() / n - 0.1) < 0.03     # (a random draw equal to the original counts here)
    assert abs(randomised.sum().item() / n - 0.1) < 0.03
    assert torch.equal(inputs[~picked], ids[~picked])   # nothing else changes
    assert inputs[randomised].min() >= 5                # random replacements are ordinary tokens


def test_corpus_formats(tmp_path):
    (tmp_path / "a.txt").write_text("First one.\n\nSecond one!\nFirst one.\n", encoding="utf-8")
    assert read_corpus(tmp_path / "a.txt") == ["First one.", "Second one!"]
    (tmp_path / "b.csv").write_text('id,text\n1,"Hello, world."\n2,Bye now.\n', encoding="utf-8")
    assert read_corpus(tmp_path / "b.csv") == ["Hello, world.", "Bye now."]
    (tmp_path / "c.tsv").write_text("a\tb\ttopic\nthe cat sat down\ta cat was sitting\tpets\n", encoding="utf-8")
    assert read_corpus(tmp_path / "c.tsv") == ["the cat sat down", "a cat was sitting"]
    (tmp_path / "d.jsonl").write_text('{"text": "One."}\n"Two."\n{"sentence": "Three."}\n', encoding="utf-8")
    assert read_corpus(tmp_path / "d.jsonl") == ["One.", "Two.", "Three."]
    with pytest.raises(InputError):
        read_corpus(tmp_path / "missing.txt")
    (tmp_path / "e.jsonl").write_text('{"x": 1}\n', encoding="utf-8")
    with pytest.raises(InputError, match="text"):
        read_corpus(tmp_path / "e.jsonl")


def test_wrapped_prose_is_cut_into_sentences():
    prose = ("It was a bright cold day in April, and the clocks\nwere striking thirteen. Winston "
             "Smith slipped\nquickly through the doors.\n\nA new paragraph starts\nhere. And ends.\n")
    assert split_text(prose) == [
        "It was a bright cold day in April, and the clocks were striking thirteen.",
        "Winston Smith slipped quickly through the doors.", "A new paragraph starts here.", "And ends."]


def test_lines_of_short_lower_case_sentences_are_one_sentence_each(tmp_path):
    # no closing punctuation and a lower-case next line, as wrapped prose has, but no sentence
    # ends inside a line: one sentence a line, not one long one
    assert split_text("the cat sat on the mat\nthe dog ran in the park\n") == [
        "the cat sat on the mat", "the dog ran in the park"]
    assert split_text("a cat\nthe dog\nsome bird\n") == ["a cat", "the dog", "some bird"]
    (tmp_path / "two.txt").write_text("the cat sat on the mat\nthe dog ran in the park\n", encoding="utf-8")
    assert len(read_corpus(tmp_path / "two.txt")) == 2


def test_store_corpus(tmp_path):
    """A FAISS store folder (or its store.db) is a corpus: its sentences in id order."""
    from index.corpus.door import read_training_corpus
    from index.opening import open_store
    from tests.support.store_backends import Fingerprint, clustered

    folder = tmp_path / "store"
    with open_store(folder, create=True, fingerprint=Fingerprint("fake", "f" * 64, "mean", 8, True)) as store:
        store.add(["first", "second", "first"], clustered(3, 8))
    assert read_training_corpus(folder) == ["first", "second"]
    assert read_training_corpus(folder / "store.db", limit=1) == ["first"]


def test_milvus_lite_store_corpus(tmp_path):
    """A Milvus Lite store is a corpus too: as milvus-lite:FOLDER and as its plain folder."""
    pytest.importorskip("milvus_lite")
    pytest.importorskip("pymilvus")
    from index.opening import open_store
    from tests.support.store_backends import Fingerprint, clustered

    location = f"milvus-lite:{tmp_path / 'lite'}"
    store = open_store(location, create=True, fingerprint=Fingerprint("fake", "f" * 64, "mean", 8, True))
    try:
        store.add(["first one.", "second one.", "third one."], clustered(3, 8))
    finally:
        store.close()
    from index.corpus.door import read_training_corpus
    assert read_training_corpus(location) == ["first one.", "second one.", "third one."]
    assert read_training_corpus(tmp_path / "lite", limit=2) == ["first one.", "second one."]
    from core.errors import EncoderscopeError
    with pytest.raises(EncoderscopeError, match="no store"):          # the CLI's one-line error
        read_training_corpus(f"milvus-lite:{tmp_path / 'none'}")


def test_split_and_sampler_are_deterministic():
    sents = [f"s{i}" for i in range(100)]
    tr, ho = split_heldout(sents, 0.05, seed=3)
    assert len(ho) == 5 and not set(tr) & set(ho) and split_heldout(sents, 0.05, seed=3) == (tr, ho)
    a = BatchSampler(10, 4, seed=1)
    seq = [a.next().tolist() for _ in range(5)]
    assert all(len(set(b)) == len(b) == 4 for b in seq)      # a batch never repeats a sentence
    b = BatchSampler(10, 4, seed=1)
    b.next(), b.next()
    c = BatchSampler(10, 4, seed=1, **b.state())
    assert [c.next().tolist() for _ in range(3)] == seq[2:]


def test_lr_schedule(corpus, tmp_path):
    t = Trainer(tiny_config(corpus, tmp_path / "x", steps=100, warmup=10, lr=1e-3))
    t.peak_lr = 1e-3
    lrs = [t._lr(s) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert max(lrs) == pytest.approx(1e-3) and lrs[-1] < 2e-5
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
    t2 = Trainer(tiny_config(corpus, tmp_path / "y", steps=100, objective="mlm+simcse", warmup=10))
    t2.peak_lr = 1e-3
    assert [t2._phase(s) for s in (0, 49, 50, 99)] == ["mlm", "mlm", "simcse", "simcse"]
    assert t2._lr(50) == pytest.approx(1e-4)                 # each phase warms up again


def test_bad_options(corpus, tmp_path):
    for kw, msg in [({"objective": "gpt"}, "objective"), ({"dim": 50, "heads": 4}, "divisible"),
                    ({"init": str(tmp_path / "nofolder")}, "init")]:
        with pytest.raises(InputError, match=msg):
            Trainer(tiny_config(corpus, tmp_path / "o", **kw)).run()
    with pytest.raises(InputError, match="does not exist"):
        Trainer(tiny_config(tmp_path / "nope.txt", tmp_path / "o")).run()
    # Options torch would reject with a traceback (or that make a run meaningless) are input errors.
    for kw, msg in [({"dropout": 1.5}, "dropout"), ({"log_every": 0}, "log_every"), ({"lr": -1.0}, "lr"),
                    ({"warmup": -1.0}, "warmup"), ({"eval_every": -5}, "eval_every"),
                    ({"objective": "mlm+simcse", "mlm_fraction": 1.5, "dropout": 0.1}, "mlm_fraction"),
                    ({"objective": "simcse", "dropout": 0.0}, "dropout > 0"),
                    ({"objective": "simcse", "dropout": 0.1, "batch_size": 1}, "at least 2")]:
        with pytest.raises(InputError, match=msg):
            Trainer(tiny_config(corpus, tmp_path / "o", **kw)).run()
    assert not (tmp_path / "o").exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        Trainer(tiny_config(corpus, tmp_path / "busy")).run()


def test_atomic_folder_recovers_from_an_interrupted_swap(tmp_path):
    out = tmp_path / "ckpt"
    atomic_folder(out, lambda f: (f / "x").write_text("1"))
    atomic_folder(out, lambda f: (f / "x").write_text("2"))
    assert (out / "x").read_text() == "2" and sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    out.rename(tmp_path / ".ckpt.old")                 # killed between the two renames
    recover(out)
    assert (out / "x").read_text() == "2"

    def boom(f):
        (f / "x").write_text("3")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        atomic_folder(out, boom)                       # killed while writing: the old one stays
    assert (out / "x").read_text() == "2"


# ---- training ----------------------------------------------------------------------------


def test_mlm_beats_random_init_and_unigram(trained):
    summary, events, _, _ = trained
    evals = [e for e in events if e["kind"] == "eval"]
    first, last = evals[0], evals[-1]
    assert first["step"] == 0 and last["step"] == 300
    # random init: about log(V); the unigram guess knows frequencies; the model must beat both.
    assert last["heldout_mlm_loss"] < 0.5 * first["heldout_mlm_loss"]
    assert last["heldout_mlm_loss"] < 0.6 * last["unigram_loss"]
    assert last["heldout_mlm_accuracy"] > last["unigram_accuracy"] + 0.25
    assert summary["steps"] == 300 and summary["device"].startswith("cpu") and summary["precision"] == "fp32"
    assert summary["heldout_mlm_loss"] == last["heldout_mlm_loss"] and not summary["cancelled"]
    steps = [e for e in events if e["kind"] == "step"]
    assert [e["step"] for e in steps] == list(range(10, 301, 10))
    assert all(e["tokens_per_s"] > 0 and e["lr"] > 0 and e["eta_s"] >= 0 for e in steps)
    assert steps[-1]["eta_s"] == 0
    kinds = [e["kind"] for e in events]
    assert kinds[-1] == "done" and "start" in kinds and "checkpoint" in kinds


def test_checkpoint_reloads_to_identical_outputs(trained):
    from transformers import AutoTokenizer

    _, _, out, trained_model = trained
    assert {"model.safetensors", "encoderscope.json", "tokenizer.json", STATE_JSON, STATE_TENSORS} <= \
        {p.name for p in out.iterdir()}
    meta = json.loads((out / "encoderscope.json").read_text())
    assert meta["mlm_head"] and meta["training"]["step"] == 300 and meta["training"]["objective"] == "mlm"
    model, cfg, layout = load_folder(out)
    tok = AutoTokenizer.from_pretrained(str(out))
    assert layout == "encoderscope" and cfg.dim == 48 and len(tok) == cfg.vocab_size
    enc = tok(["anna lives in paris and [MASK] french at home."], return_tensors="pt")
    with torch.no_grad():
        a, _ = model(enc["input_ids"], enc["attention_mask"])
        b, _ = trained_model(enc["input_ids"], enc["attention_mask"])     # the model as trained
    assert torch.equal(a, b)
    pos = enc["input_ids"][0].tolist().index(tok.mask_token_id)
    assert tok.convert_ids_to_tokens([int(a[0, pos].argmax())]) == ["speaks"]   # the template's word


def test_resume_continues_the_same_curve_and_cancel_leaves_a_checkpoint(corpus, tmp_path, trained):
    _, full_events, _, _ = trained
    out = tmp_path / "part"
    seen = []

    def cancel():                                     # stop after step 120, like a Cancel click
        return any(e["kind"] == "step" and e["step"] >= 120 for e in seen)
    first = Trainer(tiny_config(corpus, out)).run(progress=seen.append, cancel=cancel)
    assert first["cancelled"] and first["steps"] == 120
    state = json.loads((out / STATE_JSON).read_text())
    assert state["step"] == 120
    model, _, _ = load_folder(out)                    # usable as a model right away
    assert model.config.dim == 48

    rest = []
    second = Trainer(TrainConfig.from_checkpoint(out)).run(progress=rest.append)
    assert second["steps"] == 300 and second["steps_this_run"] == 180
    full = {e["step"]: e["loss"] for e in full_events if e["kind"] == "step"}
    resumed = {e["step"]: e["loss"] for e in rest if e["kind"] == "step"}
    assert sorted(resumed) == list(range(130, 301, 10))
    for s, loss in resumed.items():
        assert loss == pytest.approx(full[s], rel=1e-5, abs=1e-6), s
    full_eval = {e["step"]: e["heldout_mlm_loss"] for e in full_events if e["kind"] == "eval"}
    assert second["heldout_mlm_loss"] == pytest.approx(full_eval[300], rel=1e-5)
    start = next(e for e in rest if e["kind"] == "start")
    assert start["history"]["train"][-1]["step"] == 120     # the curve so far, for the app


def test_checkpoints_at_intervals_and_at_the_end(corpus, tmp_path):
    events, steps_on_disk = [], []

    def progress(ev):
        events.append(ev)
        if ev["kind"] == "checkpoint":       # the folder on disk is that step's complete checkpoint
            steps_on_disk.append(json.loads((Path(ev["path"]) / STATE_JSON).read_text())["step"])
    Trainer(tiny_config(corpus, tmp_path / "ck", steps=12, checkpoint_every=5, eval_every=100)).run(progress=progress)
    assert [e["step"] for e in events if e["kind"] == "checkpoint"] == steps_on_disk == [5, 10, 12]
    model, _, _ = load_folder(tmp_path / "ck")
    assert model.config.dim == 48


def test_cancel_before_the_first_step(corpus, tmp_path):
    ev = threading.Event()
    ev.set()
    s = Trainer(tiny_config(corpus, tmp_path / "c0")).run(cancel=ev)
    assert s["cancelled"] and s["steps"] == 0 and (tmp_path / "c0" / "model.safetensors").is_file()


def test_overwrite_guard_and_resume_beyond(corpus, tmp_path, trained):
    _, _, out, trained_model = trained
    with pytest.raises(InputError, match="already holds a checkpoint"):
        Trainer(tiny_config(corpus, out)).run()
    more = Trainer(TrainConfig.from_checkpoint(out, out=str(tmp_path / "more"), steps=320)).run()
    assert more["steps"] == 320 and more["steps_this_run"] == 20


def test_sinusoidal_post_norm_wordpiece(corpus, tmp_path):
    """The other architecture options train too (wordpiece: minilm's vocabulary)."""
    s = Trainer(tiny_config(corpus, tmp_path / "wp", tokenizer="wordpiece", positions="sinusoidal",
                            norm="post", steps=60, lr=2e-3, eval_every=60)).run()
    assert s["heldout_mlm_loss"] < s["initial_heldout_mlm_loss"]
    model, cfg, _ = load_folder(tmp_path / "wp")
    assert cfg.vocab_size == 30522 and cfg.positions == "sinusoidal" and cfg.norm == "post"


@needs_cpu_bf16
def test_bf16_autocast_on_cpu(corpus, tmp_path):
    s = Trainer(tiny_config(corpus, tmp_path / "bf", precision="bf16", steps=40, eval_every=40)).run()
    assert s["precision"] == "bf16" and np.isfinite(s["train_loss"])
    assert s["heldout_mlm_loss"] < s["initial_heldout_mlm_loss"]


@pytest.mark.slow
def test_longer_run_learns_which_food_each_animal_eats(corpus, tmp_path):
    """2,000 steps (about a minute on one CPU thread): the model binds words across positions."""
    from tests.support.train_corpus import ANIMALS

    t = Trainer(tiny_config(corpus, tmp_path / "long", layers=2, dim=64, ffn=128, steps=2000, lr=1e-3,
                            eval_every=1000))
    s = t.run()
    assert s["heldout_mlm_accuracy"] > 0.75
    model, tok = t.model.eval(), t.tokenizer
    right = 0
    for animal, (sound, food) in ANIMALS.items():
        enc = tok([f"every morning the {animal} eats [MASK] and then it {sound}."], return_tensors="pt")
        with torch.no_grad():
            logits, _ = model(enc["input_ids"], enc["attention_mask"])
        pos = enc["input_ids"][0].tolist().index(tok.mask_token_id)
        right += tok.convert_ids_to_tokens([int(logits[0, pos].argmax())])[0] == food
    assert right >= 6
