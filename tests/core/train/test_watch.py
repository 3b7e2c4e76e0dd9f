"""Watching a run: gradient flow, probes and snapshots, metrics.jsonl, resume, `train --json`.

Each number is checked against an independent computation: norms from ``p.grad`` and from the
weights before and after the step, attentions from `encoderscope inspect` on the checkpoint saved
at that step, entropy / cosines / anisotropy in plain numpy.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from core.train import run_folder
from core.train.config import TrainConfig
from core.train.trainer import Trainer
from core.train.watch import anisotropy, default_probe_set
from tests.support.train_corpus import tiny_config, write_corpus

PROBE = "the dog barks in the park ."


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "gen.txt", n=600)


def small(corpus, out, **kw):
    """A 2-layer, dim-32 model, a few dozen steps."""
    base = dict(layers=2, dim=32, heads=2, ffn=64, steps=30, batch_size=16, log_every=5, eval_every=10,
                eval_sentences=60, probe_every=10, probe_sentence=PROBE, dropout=0.0)
    base.update(kw)
    return tiny_config(corpus, out, **base)


@pytest.fixture(scope="module")
def watched(corpus, tmp_path_factory):
    """One watched run, its checkpoint at step 10 copied aside: (trainer, events, out, copy of step 10)."""
    root = tmp_path_factory.mktemp("watched")
    out, at10 = root / "run", root / "at10"
    events = []

    def progress(ev):
        events.append(ev)
        if ev["kind"] == "checkpoint" and ev["step"] == 10:
            shutil.copytree(ev["path"], at10)
    trainer = Trainer(small(corpus, out, checkpoint_every=10))
    trainer.run(progress=progress)
    return trainer, events, out, at10


def group_of(name: str) -> str:
    """The parameter groups, spelled out independently of core.train.watch."""
    parts = name.split(".")
    if "layer" in parts:
        i = parts.index("layer")
        return f"layer {int(parts[i + 1]) + 1} " + ("attention" if parts[i + 2] in ("attention", "sa_layer_norm")
                                                     else "FFN")
    if parts[0] == "distilbert" and parts[1] == "embeddings":
        return "embeddings"
    if parts[1] == "final_layer_norm":
        return "final norm"
    return "MLM head"


def test_gradient_norms_and_update_ratios_equal_a_recomputation(corpus, tmp_path):
    trainer = Trainer(small(corpus, tmp_path / "g", grad_clip=0.0))
    trainer._setup()
    trainer.model.train()
    for _ in range(3):                                    # past the first step: Adam's moments are real
        trainer._train_step("mlm")
    named = dict(trainer.model.named_parameters())
    before = {n: p.detach().clone() for n, p in named.items()}
    trainer._train_step("mlm", watch=True)
    report = trainer.grad_flow.report()

    grad_sq, delta_sq, weight_sq = {}, {}, {}
    for n, p in named.items():
        g = group_of(n)
        grad_sq[g] = grad_sq.get(g, 0.0) + float((p.grad.double() ** 2).sum())
        delta_sq[g] = delta_sq.get(g, 0.0) + float(((p.detach() - before[n]).double() ** 2).sum())
        weight_sq[g] = weight_sq.get(g, 0.0) + float((before[n].double() ** 2).sum())
    assert report["groups"] == ["embeddings", "layer 1 attention", "layer 1 FFN", "layer 2 attention",
                                "layer 2 FFN", "final norm", "MLM head"]
    for g, norm, ratio in zip(report["groups"], report["grad_norm"], report["update_ratio"]):
        assert norm == pytest.approx(np.sqrt(grad_sq[g]), rel=1e-5), g
        assert ratio == pytest.approx(np.sqrt(delta_sq[g] / weight_sq[g]), rel=1e-4), g
    assert report["total_grad_norm"] == pytest.approx(np.sqrt(sum(grad_sq.values())), rel=1e-5)
    # the head's weights are the word embeddings (tied): counted once, with the embeddings
    assert trainer.model.head is not None and "vocab_projector.weight" not in named


def test_grads_events_every_log_step(watched):
    _, events, _, _ = watched
    grads = [e for e in events if e["kind"] == "grads"]
    assert [e["step"] for e in grads] == [e["step"] for e in events if e["kind"] == "step"] == [5, 10, 15, 20, 25, 30]
    for e in grads:
        assert len(e["groups"]) == len(e["grad_norm"]) == len(e["update_ratio"]) == 7
        assert all(np.isfinite(e["grad_norm"])) and all(r > 0 for r in e["update_ratio"])


def test_snapshot_attentions_equal_inspect_on_the_checkpoint_of_that_step(watched, run):
    _, events, out, at10 = watched
    probes = {e["step"]: e for e in events if e["kind"] == "probe"}
    assert sorted(probes) == run_folder.snapshot_steps(out) == [0, 10, 20, 30]
    snap = run_folder.read_snapshot(out, 10)
    res = json.loads(run("inspect", PROBE, "--model", str(at10), "--json").stdout)
    ref = np.array(res["attentions"])                                     # (L, H, T, T)
    assert snap["tokens"] == res["tokens"] == probes[10]["tokens"]
    assert snap["attentions"].shape == ref.shape == (2, 2, len(res["tokens"]), len(res["tokens"]))
    np.testing.assert_allclose(snap["attentions"], ref, atol=1e-3)        # stored as float16
    # the attention changed between the snapshots: the slider has something to show
    assert np.abs(run_folder.read_snapshot(out, 30)["attentions"] - snap["attentions"]).max() > 1e-3
    # each head's entropy: mean over the query rows of -sum p log p, in numpy
    p = np.clip(ref, 1e-12, None)
    ent = -(p * np.log(p)).sum(-1).mean(-1)
    np.testing.assert_allclose(probes[10]["entropy"], ent, atol=1e-5)
    np.testing.assert_allclose(snap["entropy"], ent, atol=1e-5)


def test_probe_cosines_and_anisotropy_equal_brute_force(watched):
    trainer, events, out, _ = watched
    last = [e for e in events if e["kind"] == "probe"][-1]
    assert last["step"] == 30 and last["probe_texts"] == default_probe_set()
    model, tok = trainer.model.eval(), trainer.tokenizer

    def vector(ids) -> np.ndarray:            # one sentence at a time: no padding, mean of its tokens
        with torch.no_grad():
            h = model.distilbert(torch.tensor([list(ids)])).last_hidden_state[0].double().numpy()
        v = h.mean(0)
        return v / np.linalg.norm(v)
    probe = np.stack([vector(tok(t, truncation=True, max_length=24)["input_ids"]) for t in last["probe_texts"]])
    np.testing.assert_allclose(last["probe_cosine"], probe @ probe.T, atol=1e-5)
    np.testing.assert_allclose(run_folder.read_snapshot(out, 30)["probe_cosine"], probe @ probe.T, atol=1e-5)
    sample = np.stack([vector(trainer.train_ids[i]) for i in trainer.probe.sample])
    pairs = [float(sample[i] @ sample[j]) for i in range(len(sample)) for j in range(i + 1, len(sample))]
    assert len(sample) == min(64, len(trainer.train_ids))
    assert last["anisotropy"] == pytest.approx(np.mean(pairs), abs=1e-6)


def test_anisotropy_of_known_vectors():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 8))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    brute = np.mean([z[i] @ z[j] for i in range(50) for j in range(50) if i != j])
    assert anisotropy(z) == pytest.approx(brute, abs=1e-12)
    assert anisotropy(np.ones((4, 3)) / np.sqrt(3)) == pytest.approx(1.0)
    assert anisotropy(z[:1]) is None


def test_metrics_jsonl_holds_every_event(watched):
    _, events, out, _ = watched
    assert run_folder.read_metrics(out) == json.loads(json.dumps(events))


def test_torn_last_line_and_older_runs(tmp_path, watched):
    _, events, out, _ = watched
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    with open(copy / run_folder.METRICS, "a", encoding="utf-8") as f:
        f.write('{"kind": "step", "step": 3')                  # a kill in mid-line
    assert len(run_folder.read_metrics(copy)) == len(events)
    (copy / run_folder.METRICS).unlink()                        # a run trained before metrics.jsonl
    old = run_folder.read_metrics(copy)
    assert [e["step"] for e in old if e["kind"] == "step"] == [5, 10, 15, 20, 25, 30]
    assert [e["loss"] for e in old if e["kind"] == "step"] == [e["loss"] for e in events if e["kind"] == "step"]
    assert [e["step"] for e in old if e["kind"] == "eval"] == [0, 10, 20, 30]


def test_resume_after_a_crash_continues_metrics_and_snapshots(corpus, tmp_path, watched):
    _, full, _, _ = watched
    out = tmp_path / "crashed"

    def crash(ev):                          # dies at step 15: past the checkpoint at 10
        if ev["kind"] == "probe" and ev["step"] == 15:
            raise RuntimeError("killed")
    with pytest.raises(RuntimeError):
        Trainer(small(corpus, out, checkpoint_every=10, probe_every=5)).run(progress=crash)
    assert 15 in run_folder.snapshot_steps(out)
    Trainer(TrainConfig.from_checkpoint(out, probe_every=10)).run()
    metrics = run_folder.read_metrics(out)
    steps = [e["step"] for e in metrics if e["kind"] == "step"]
    assert steps == [5, 10, 15, 20, 25, 30]                    # no line from past the checkpoint
    # probes of the first part every 5 steps up to the checkpoint, then every 10
    assert [e["step"] for e in metrics if e["kind"] == "probe"] == run_folder.snapshot_steps(out) == [0, 5, 10, 20, 30]
    # the same curve as the run that was never interrupted
    ref = {(e["kind"], e["step"]): e for e in full if e["kind"] in ("step", "grads")}
    for e in metrics:
        if e["kind"] == "step":
            assert e["loss"] == pytest.approx(ref["step", e["step"]]["loss"], rel=1e-5)
        elif e["kind"] == "grads":
            np.testing.assert_allclose(e["grad_norm"], ref["grads", e["step"]]["grad_norm"], rtol=1e-4)
    assert sum(e["kind"] == "start" for e in metrics) == 2


def test_resume_into_another_folder_copies_the_past(watched, tmp_path):
    _, _, out, at10 = watched
    other = tmp_path / "other"
    Trainer(TrainConfig.from_checkpoint(at10, out=str(other), steps=20)).run()
    metrics = run_folder.read_metrics(other)
    assert [e["step"] for e in metrics if e["kind"] == "step"] == [5, 10, 15, 20]
    assert run_folder.snapshot_steps(other) == [0, 10, 20]
    assert run_folder.snapshot_steps(at10) == [0, 10]           # the source is left as it was


def test_watching_does_not_change_the_training(corpus, tmp_path):
    on, off = [], []
    Trainer(small(corpus, tmp_path / "on", steps=15)).run(progress=on.append)
    Trainer(small(corpus, tmp_path / "off", steps=15, watch=False)).run(progress=off.append)
    assert [e["loss"] for e in on if e["kind"] == "step"] == [e["loss"] for e in off if e["kind"] == "step"]
    assert not any(e["kind"] in ("grads", "probe") for e in off)
    assert not (tmp_path / "off" / run_folder.SNAPSHOTS).exists()
    assert run_folder.read_metrics(tmp_path / "off") == json.loads(json.dumps(off))


def test_train_json_prints_every_event(corpus, tmp_path, run):
    probe_set = tmp_path / "probe.txt"
    probe_set.write_text("the cat meows.\nthe cat sings.\nanna lives in paris.\n", encoding="utf-8")
    res = run("train", "--corpus", str(corpus), "--out", str(tmp_path / "j"), "--steps", "12", "--layers", "1",
              "--dim", "16", "--heads", "2", "--ffn", "32", "--batch-size", "8", "--log-every", "4",
              "--probe-every", "6", "--threads", "1", "--device", "cpu", "--probe-set", str(probe_set), "--json")
    events = [json.loads(line) for line in res.stdout.splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds[-1] == "done" and {"status", "start", "step", "grads", "eval", "probe", "checkpoint"} <= set(kinds)
    assert [e["step"] for e in events if e["kind"] == "probe"] == [0, 6, 12]
    assert events[-1]["steps"] == 12 and not events[-1]["cancelled"]
    probe = next(e for e in events if e["kind"] == "probe")
    assert probe["probe_texts"] == ["the cat meows.", "the cat sings.", "anna lives in paris."]
    assert np.array(probe["probe_cosine"]).shape == (3, 3)
    assert run_folder.read_metrics(tmp_path / "j") == events
    assert "100%" not in res.stderr                                        # no progress bar


def test_train_probe_set_errors(corpus, tmp_path, run):
    res = run("train", "--corpus", str(corpus), "--out", str(tmp_path / "e"), "--probe-set",
              str(tmp_path / "missing.txt"), check=False)
    assert res.returncode == 2 and res.stderr.startswith("error:") and "missing.txt" in res.stderr
    one = tmp_path / "one.txt"
    one.write_text("only one sentence\n", encoding="utf-8")
    res = run("train", "--corpus", str(corpus), "--out", str(tmp_path / "e"), "--probe-set", str(one), check=False)
    assert res.returncode == 2 and "at least two sentences" in res.stderr


def test_a_broken_line_inside_metrics_is_an_input_error(tmp_path):
    from core.errors import InputError
    (tmp_path / run_folder.METRICS).write_text('{"kind": "step", "step": 1}\nnot json\n{"kind": "step", "step": 2}\n')
    with pytest.raises(InputError, match="line 2 is not JSON"):
        run_folder.read_metrics(tmp_path)


def test_a_run_that_died_before_its_first_checkpoint_leaves_a_reusable_folder(corpus, tmp_path):
    out = tmp_path / "early"

    def crash(ev):
        if ev["kind"] == "step":
            raise RuntimeError("killed")
    with pytest.raises(RuntimeError):
        Trainer(small(corpus, out, steps=10)).run(progress=crash)
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl", "snapshots"]
    Trainer(small(corpus, out, steps=10)).run()                   # neither "not empty" nor "holds a checkpoint"
    metrics = run_folder.read_metrics(out)
    assert [e["kind"] for e in metrics].count("start") == 1       # the dead run's lines are gone
    assert run_folder.snapshot_steps(out) == [0, 10]


def test_bad_options_leave_no_folder_behind(corpus, tmp_path):
    from core.errors import InputError
    with pytest.raises(InputError):
        Trainer(small(corpus, tmp_path / "never", probe_set=("only one",))).run()
    assert not (tmp_path / "never").exists()


def test_train_no_watch(corpus, tmp_path, run):
    res = run("train", "--corpus", str(corpus), "--out", str(tmp_path / "nw"), "--steps", "8", "--layers", "1",
              "--dim", "16", "--heads", "2", "--ffn", "32", "--batch-size", "8", "--log-every", "4",
              "--threads", "1", "--device", "cpu", "--no-watch", "--json")
    kinds = {json.loads(line)["kind"] for line in res.stdout.splitlines()}
    assert "step" in kinds and not kinds & {"grads", "probe"}
    assert not (tmp_path / "nw" / "snapshots").exists()


def test_the_default_probe_sentence_is_one_the_vocabulary_knows(tmp_path):
    """Held-out sentences may hold words the word tokenizer (built from the training sentences)
    never saw: the default probe sentence is one without [UNK]."""
    import random

    from tests.support.train_corpus import sentence
    rng = random.Random(1)
    lines = [sentence(rng) + (f" zq{i}x ." if i % 2 == 0 else "") for i in range(400)]
    path = tmp_path / "rare.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    events = []
    Trainer(small(path, tmp_path / "run", probe_sentence="", steps=2, eval_every=2, probe_every=2)).run(
        progress=events.append)
    probe = next(e for e in events if e["kind"] == "probe")
    assert "[UNK]" not in probe["tokens"] and len(probe["tokens"]) > 3
