"""Keeping and comparing runs: `runs list`, `runs compare`, final metrics from the run's own files."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace

import pytest

from tests.support.tiny_models import one_error
from tests.support.train_corpus import tiny_config, write_corpus


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two tiny runs on the same data that differ in norm and lr (and their output folders)."""
    from core.train.trainer import Trainer

    root = tmp_path_factory.mktemp("runs")
    corpus = write_corpus(root / "c.txt", n=200)
    base = tiny_config(corpus, root / "lab" / "a", layers=2, dim=32, heads=2, ffn=64, steps=30,
                       eval_every=10, log_every=5)
    other = replace(base, out=str(root / "lab" / "b"), norm="post", lr=1e-3)
    for cfg in (base, other):
        Trainer(cfg).run()
    return root / "lab" / "a", root / "lab" / "b"


def _state(folder):
    return json.loads((folder / "trainer_state.json").read_text())


def test_compare_lists_exactly_the_settings_changed(run, two_runs):
    a, b = two_runs
    got = json.loads(run("runs", "compare", a, b, "--json").stdout)
    assert got["differs"] == ["norm", "lr"]          # out differs too, and is never listed
    assert set(got["ignored"]) == {"out", "resume", "overwrite"}
    assert [r["path"] for r in got["runs"]] == [str(a), str(b)]
    for r, folder in zip(got["runs"], two_runs):
        assert r["config"] == _state(folder)["config"]
    # the human table names the differing settings and each run's values
    text = run("runs", "compare", a, b).stdout
    assert "norm" in text and "post" in text and "pre" in text and "0.001" in text


def test_final_metrics_of_a_run_without_metrics_file_come_from_its_history(two_runs, tmp_path):
    from core.train.runs import read_run

    a = shutil.copytree(two_runs[0], tmp_path / "older")
    (a / "metrics.jsonl").unlink(missing_ok=True)                 # a run trained before runs were watched
    history = _state(a)["history"]
    final = read_run(a).final
    assert final["loss"] == history["train"][-1]["loss"]
    last_eval = history["eval"][-1]
    for key in ("heldout_mlm_loss", "heldout_mlm_accuracy", "unigram_loss"):
        assert final[key] == last_eval[key]
    assert "anisotropy" not in final                     # never measured: left out, not made up


def test_final_metrics_are_the_last_lines_of_metrics_jsonl(tmp_path, two_runs):
    from core.train.run_folder import read_metrics
    from core.train.runs import curves, read_run

    folder = tmp_path / "r"
    shutil.copytree(two_runs[0], folder)
    lines = [
        {"kind": "step", "step": 5, "total": 10, "phase": "mlm", "loss": 7.5, "lr": 1e-4},
        {"kind": "grads", "step": 5, "total": 10, "groups": ["embeddings", "layer 1 attention"],
         "grad_norm": [0.5, 0.25], "update_ratio": [1e-3, 2e-3], "total_grad_norm": 0.75},
        {"kind": "probe", "step": 5, "total": 10, "entropy": [[1.0, 2.0]], "probe_cosine": [[1.0]],
         "snapshot": "snapshots/step-0000005.safetensors"},
        {"kind": "probe", "step": 5, "total": 10, "anisotropy": 0.9},
        {"kind": "eval", "step": 5, "total": 10, "heldout_mlm_loss": 7.0, "pair_cosine": None},
        {"kind": "step", "step": 10, "total": 10, "phase": "mlm", "loss": 6.25, "lr": 2e-4},
        {"kind": "probe", "step": 10, "total": 10, "anisotropy": 0.75},
        {"kind": "eval", "step": 10, "total": 10, "heldout_mlm_loss": 6.5, "heldout_mlm_accuracy": 0.125,
         "pair_cosine": None},
    ]
    text = "".join(json.dumps(x) + "\n" for x in lines) + '{"kind": "step", "step": 11, "lo'   # torn
    (folder / "metrics.jsonl").write_text(text)
    assert read_metrics(folder) == lines
    assert read_run(folder).final == {"loss": 6.25, "heldout_mlm_loss": 6.5, "heldout_mlm_accuracy": 0.125,
                                      "anisotropy": 0.75}
    series = curves(lines)
    assert series["step.loss"] == [(5, 7.5), (10, 6.25)]
    assert series["grads.grad_norm.layer 1 attention"] == [(5, 0.25)]
    assert series["grads.update_ratio.embeddings"] == [(5, 1e-3)]
    assert series["grads.total_grad_norm"] == [(5, 0.75)]
    assert not any("entropy" in name or "cosine" in name or "groups" in name for name in series)
    assert series["probe.anisotropy"] == [(5, 0.9), (10, 0.75)]
    assert "eval.pair_cosine" not in series


def test_final_metrics_of_a_watched_run_are_its_metrics_file_read_plainly(two_runs):
    from core.train.runs import read_run

    a, _ = two_runs
    path = a / "metrics.jsonl"
    assert path.is_file(), "every run keeps its events in metrics.jsonl (core/train/run_folder.py)"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    expect = {"loss": [e for e in events if e["kind"] == "step"][-1]["loss"]}
    last_eval = [e for e in events if e["kind"] == "eval"][-1]
    expect.update({k: v for k, v in last_eval.items() if isinstance(v, float)})
    probes = [e for e in events if e["kind"] == "probe" and e.get("anisotropy") is not None]
    if probes:
        expect["anisotropy"] = probes[-1]["anisotropy"]
    assert read_run(a).final == expect


def test_list_is_newest_first_and_skips_what_is_not_a_run(run, two_runs, tmp_path):
    root = tmp_path / "many"
    a, b = (shutil.copytree(f, root / "nested" / f.name) for f in two_runs)
    shutil.copytree(two_runs[0], root / ".a.tmp")                 # a checkpoint being written
    (root / "notes").mkdir()
    bad = shutil.copytree(two_runs[0], root / "broken")
    (bad / "trainer_state.json").write_text("{not json")
    os.utime(a / "trainer_state.json", (1_000_000, 1_000_000))
    os.utime(b / "trainer_state.json", (2_000_000, 2_000_000))
    got = run("runs", "list", "--dir", root, "--json")
    listed = json.loads(got.stdout)["runs"]
    assert [r["path"] for r in listed] == [str(b), str(a)]
    assert listed[0]["step"] == 30 and listed[0]["objective"] == "mlm" and listed[0]["final"]["loss"] > 0
    assert "broken" in got.stderr and got.stderr.count("note:") == 1
    human = run("runs", "list", "--dir", root).stdout
    assert human.index(str(b)) < human.index(str(a))


def test_list_defaults_to_the_models_folder(run, tmp_path, monkeypatch, two_runs):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "fresh"))
    assert json.loads(run("runs", "list", "--json").stdout)["runs"] == []
    assert run("runs", "list").stdout.startswith("no training runs under")
    from core.paths import models_dir
    shutil.copytree(two_runs[0], models_dir() / "mine")
    assert [r["path"] for r in json.loads(run("runs", "list", "--json").stdout)["runs"]] == [
        str(models_dir() / "mine")]


@pytest.mark.parametrize("args, words", [
    (("compare", "{a}", "{missing}"), "no such folder"),
    (("compare", "{a}", "{corpus}"), "a file, not a run folder"),
    (("compare", "{a}", "{plain}"), "is not a training run"),
    (("compare", "{a}"), "two or more"),
    (("list", "--dir", "{missing}"), "no such folder"),
])
def test_bad_folders_get_one_error_line(run, two_runs, tmp_path, args, words):
    (tmp_path / "plain").mkdir()
    (tmp_path / "c.txt").write_text("x\n")
    names = dict(a=two_runs[0], missing=tmp_path / "nope", corpus=tmp_path / "c.txt", plain=tmp_path / "plain")
    got = run("runs", *(a.format(**names) for a in args), check=False)
    assert words in one_error(got.returncode, got.stderr) and "Traceback" not in got.stderr


def test_a_setting_an_older_run_lacks_counts_as_its_default():
    from core.train.config import TrainConfig
    from core.train.runs import differing_settings

    new = TrainConfig(corpus="c", out="x").to_dict()
    old = {k: v for k, v in new.items() if k != "norm"}              # written before `norm` existed
    assert differing_settings([new, old]) == []
    assert differing_settings([new, {**old, "norm": "post"}]) == ["norm"]
    assert differing_settings([new, {**new, "out": "y", "resume": "z", "overwrite": True}]) == []


def test_csv_exports_hold_every_point_and_row(tmp_path, two_runs):
    import csv

    from core.train.run_folder import read_metrics
    from core.train.runs import compare_runs, curves, write_comparison_csv, write_curves_csv

    events = {str(f): read_metrics(f) for f in two_runs}
    n = write_curves_csv(tmp_path / "curves.csv", events)
    rows = list(csv.DictReader(open(tmp_path / "curves.csv")))
    assert n == len(rows) == sum(len(p) for ev in events.values() for p in curves(ev).values())
    loss_a = [(int(r["step"]), float(r["value"])) for r in rows
              if r["run"] == str(two_runs[0]) and r["series"] == "step.loss"]
    assert loss_a == curves(events[str(two_runs[0])])["step.loss"]
    comparison = compare_runs(list(two_runs))
    write_comparison_csv(tmp_path / "table.csv", comparison)
    table = list(csv.DictReader(open(tmp_path / "table.csv")))
    assert [r["norm"] for r in table] == ["pre", "post"]
    assert float(table[1]["loss"]) == comparison["runs"][1]["final"]["loss"]


def test_an_export_cut_short_keeps_the_previous_file(two_runs, tmp_path, monkeypatch):
    """A write that fails half-way (a full disk) leaves the earlier export whole and no temp file."""
    import csv

    from core.train.run_folder import read_metrics
    from core.train.runs import write_curves_csv

    events = {str(f): read_metrics(f) for f in two_runs}
    target = tmp_path / "curves.csv"
    write_curves_csv(target, events)
    before = target.read_bytes()
    real_writer = csv.writer

    class FullDisk:
        def __init__(self, f):
            self.out, self.rows = real_writer(f), 0

        def writerow(self, row):
            self.rows += 1
            if self.rows > 3:
                raise OSError(28, "No space left on device")
            self.out.writerow(row)

    monkeypatch.setattr(csv, "writer", FullDisk)
    with pytest.raises(OSError):
        write_curves_csv(target, events)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
