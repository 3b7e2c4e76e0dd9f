"""The lab's experiments: runs that differ in exactly the named setting (plus what it implies),
run one after another, cancelled, and compared."""
from __future__ import annotations

import json
import threading
from dataclasses import fields

import pytest

from tests.support.tiny_models import one_error
from tests.support.train_corpus import write_corpus

TINY_FLAGS = ["--steps", "30", "--layers", "2", "--dim", "32", "--heads", "2", "--ffn", "64",
              "--batch-size", "16", "--max-length", "24", "--threads", "1", "--device", "cpu"]


def _base(**kw):
    from core.train.config import TrainConfig
    return TrainConfig(corpus="c.txt", out="lab", **kw).to_dict()


def _diff(a: dict, b: dict) -> set[str]:
    """Independent of core.train.runs: the keys whose values differ, out aside."""
    return {k for k in set(a) | set(b) if k != "out" and a.get(k) != b.get(k)}


@pytest.mark.parametrize("name", ["norm", "positions", "objective", "pooling", "width", "heads", "layers"])
def test_runs_differ_in_exactly_the_named_setting_and_what_it_implies(name):
    from core.train.experiments import EXPERIMENTS, experiment_settings, implied_by
    from core.train.runs import differing_settings

    exp = EXPERIMENTS[name]
    runs = experiment_settings(exp, _base(), pairs="pairs.tsv")
    assert [label for label, _ in runs] == [v.label for v in exp.variants]
    settings = [s for _, s in runs]
    implied = set().union(*(implied_by(v.settings) for v in exp.variants))
    assert set(differing_settings(settings)) == set(exp.varies) | implied
    first = settings[0]
    for s, v in zip(settings, exp.variants):
        changed = _diff(first, s)
        assert changed <= set(exp.varies) | set(implied_by(v.settings)) | set(implied_by(exp.variants[0].settings))
        for key, value in v.settings.items():
            assert s[key] == value
        assert (s["corpus"], s["seed"], s["steps"]) == ("c.txt", 0, 1000)      # same data, seed, steps
    assert len({s["out"] for s in settings}) == len(settings)               # each run its own folder


def test_the_objective_experiment_runs_clm_with_a_causal_mask():
    from core.train.experiments import EXPERIMENTS, IMPLIED_SETTINGS, experiment_settings

    assert IMPLIED_SETTINGS[("objective", "clm")] == {"attention": "causal"}
    runs = dict(experiment_settings(EXPERIMENTS["objective"], _base(), pairs="p.tsv"))
    assert runs["next-token (causal)"]["attention"] == "causal"
    assert runs["masked-LM"].get("attention", "bidirectional") == "bidirectional"
    assert _diff(runs["masked-LM"], runs["next-token (causal)"]) == {"objective", "attention"}
    assert _diff(runs["masked-LM"], runs["SimCSE"]) == {"objective"}
    assert all(s["pairs"] == "p.tsv" for s in runs.values())        # all scored on the same pairs


def test_pooling_runs_train_contrastively_on_the_same_pairs():
    from core.train.experiments import EXPERIMENTS, experiment_settings

    runs = experiment_settings(EXPERIMENTS["pooling"], _base(), pairs="p.tsv")
    assert [s["pooling"] for _, s in runs] == ["cls", "mean", "max", "attention"]
    assert {(s["objective"], s["pairs"]) for _, s in runs} == {("simcse", "p.tsv")}


def test_the_norm_grid_pairs_neighbours_that_differ_in_one_setting():
    from core.train.experiments import EXPERIMENTS, experiment_settings

    exp = EXPERIMENTS["norm"]
    assert exp.grid and "2 × 2" in exp.title
    s = dict(experiment_settings(exp, _base(), pairs=""))
    pre_w, pre_n, post_w, post_n = (s[k] for k in ("pre-norm, warm-up", "pre-norm, no warm-up",
                                                  "post-norm, warm-up", "post-norm, no warm-up"))
    assert _diff(pre_w, post_w) == _diff(pre_n, post_n) == {"norm"}
    assert _diff(pre_w, pre_n) == _diff(post_w, post_n) == {"warmup"}
    assert _diff(pre_w, post_n) == {"norm", "warmup"}                   # the diagonal: both


def test_the_diff_rule_refuses_a_run_that_differs_in_anything_else():
    from core.train.experiments import Experiment, Variant, check_single_setting, experiment_settings

    sneaky = Experiment("sneaky", "norm, and the learning rate too", ("norm",),
                        (Variant("pre", {"norm": "pre"}), Variant("post", {"norm": "post", "lr": 1e-3})), "")
    with pytest.raises(ValueError, match="lr"):
        experiment_settings(sneaky, _base(), pairs="")
    two = Experiment("two", "", ("norm", "positions"),
                     (Variant("a", {"norm": "pre", "positions": "learned"}),
                      Variant("b", {"norm": "post", "positions": "sinusoidal"})), "")
    with pytest.raises(ValueError, match="differ in"):          # not a grid: one setting per pair
        experiment_settings(two, _base(), pairs="")
    same = Experiment("same", "", ("norm",), (Variant("a", {"norm": "pre"}), Variant("b", {"norm": "pre"})), "")
    with pytest.raises(ValueError, match="do not differ"):
        check_single_setting(same, [_base(norm="pre"), _base(norm="pre")])


def test_a_setting_this_build_lacks_is_an_error_not_a_silent_copy():
    from core.train.config import TrainConfig
    from core.train.experiments import EXPERIMENTS, experiment_configs

    base = TrainConfig(corpus="c.txt", out="lab")
    if "pooling" in {f.name for f in fields(TrainConfig)}:
        configs = experiment_configs(EXPERIMENTS["pooling"], base, pairs="p.tsv")
        assert [c.pooling for _, c in configs] == ["cls", "mean", "max", "attention"]
    else:
        from core.errors import InputError
        with pytest.raises(InputError, match="pooling"):
            experiment_configs(EXPERIMENTS["pooling"], base, pairs="p.tsv")


def test_whitening_is_a_page_not_a_queue(run):
    from core.train.experiments import EXPERIMENTS, get_experiment, runnable_experiments

    assert EXPERIMENTS["whitening"].page == "Evaluate" and "whitening" not in runnable_experiments()
    from core.errors import InputError
    with pytest.raises(InputError, match="Evaluate"):
        get_experiment("whitening")
    got = run("experiment", "whitening", "--corpus", "c", "--out", "o", check=False)
    assert "Evaluate page" in one_error(got.returncode, got.stderr)
    got = run("experiment", "nonsense", "--corpus", "c", "--out", "o", check=False)
    assert "norm, positions, objective" in one_error(got.returncode, got.stderr)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("exp") / "c200.txt", n=200)


def test_cli_runs_the_positions_experiment_and_compares_it(run, corpus, tmp_path):
    got = run("experiment", "positions", "--corpus", corpus, "--out", tmp_path / "pos", *TINY_FLAGS, "--json")
    result = json.loads(got.stdout)
    assert result["completed"] == ["learned positions", "sinusoidal positions"] and not result["cancelled"]
    comparison = result["comparison"]
    assert comparison["differs"] == ["positions"]
    a, b = (json.loads((tmp_path / "pos" / d / "trainer_state.json").read_text())["config"]
            for d in ("learned-positions", "sinusoidal-positions"))
    assert _diff(a, b) == {"positions"} and a["steps"] == 30 and a["dim"] == 32
    assert [r["config"] for r in comparison["runs"]] == [a, b]
    assert "run 2/2: sinusoidal positions" in got.stderr
    # the same folders compare the same from `runs compare`
    again = json.loads(run("runs", "compare", tmp_path / "pos" / "learned-positions",
                           tmp_path / "pos" / "sinusoidal-positions", "--json").stdout)
    assert again["differs"] == ["positions"]


def test_cli_reruns_into_a_used_folder_only_with_overwrite(run, corpus, tmp_path):
    args = ["experiment", "positions", "--corpus", corpus, "--out", tmp_path / "pos", *TINY_FLAGS]
    args[args.index("30")] = "10"
    run(*args)
    got = run(*args, check=False)
    assert "already holds a run: choose another --out, or add --overwrite" in one_error(got.returncode, got.stderr)
    assert "run 1/2" not in got.stderr                         # refused before any training
    got = run(*args, "--overwrite")
    assert "settings that differ:" in got.stdout and "sinusoidal positions" in got.stdout
    assert got.stdout.strip().splitlines()[-1].startswith("look at: Word order")
    got = run("experiment", "positions", "--corpus", tmp_path / "missing.txt", "--out", tmp_path / "x",
              *TINY_FLAGS, check=False)
    assert "missing.txt" in one_error(got.returncode, got.stderr)


def test_cli_refuses_to_set_what_the_experiment_varies(run, corpus, tmp_path):
    got = run("experiment", "width", "--corpus", corpus, "--out", tmp_path / "w", *TINY_FLAGS, check=False)
    assert "leave out --dim" in one_error(got.returncode, got.stderr)
    assert not (tmp_path / "w").exists()


def test_the_layers_experiment_trains_each_depth(corpus, tmp_path):
    from core.train.config import TrainConfig
    from core.train.experiments import EXPERIMENTS, run_experiment

    base = TrainConfig(corpus=str(corpus), out=str(tmp_path / "depth"), steps=20, dim=32, heads=2, ffn=64,
                       batch_size=16, max_length=24, threads=1, device="cpu", log_every=5)
    result = run_experiment(EXPERIMENTS["layers"], base)
    assert result["comparison"]["differs"] == ["layers"]
    saved = [json.loads((tmp_path / "depth" / f"layers-{n}" / "encoderscope.json").read_text())["config"]
             for n in (1, 2, 4)]
    assert [c["n_layers"] for c in saved] == [1, 2, 4] and {c["dim"] for c in saved} == {32}


def test_cancel_stops_the_queue_after_the_run_in_progress(corpus, tmp_path):
    from core.train.config import TrainConfig
    from core.train.experiments import EXPERIMENTS, run_experiment

    base = TrainConfig(corpus=str(corpus), out=str(tmp_path / "norm"), steps=30, dim=32, heads=2, ffn=64,
                       layers=2, batch_size=16, max_length=24, threads=1, device="cpu", log_every=5)
    cancel = threading.Event()
    seen = []

    def progress(ev):
        seen.append(ev)
        if ev["kind"] == "step" and ev["run"] == 1 and ev["step"] >= 10:
            cancel.set()
    result = run_experiment(EXPERIMENTS["norm"], base, progress=progress, cancel=cancel)
    assert result["cancelled"] and result["completed"] == ["pre-norm, warm-up"]
    assert [ev["label"] for ev in seen if ev["kind"] == "experiment"] == ["pre-norm, warm-up", "pre-norm, no warm-up"]
    assert result["comparison"] is None                  # one finished run: nothing to compare
    stopped = json.loads((tmp_path / "norm" / "pre-norm-no-warm-up" / "trainer_state.json").read_text())
    assert 10 <= stopped["step"] < 30                    # it saved where it stopped
    assert not (tmp_path / "norm" / "post-norm-warm-up").exists()


def test_one_seed_starts_every_objective_from_the_same_encoder():
    """An experiment compares objectives from one seed: the masked-LM model (encoder + head) and
    the SimCSE one (the encoder alone) must start with the same encoder weights."""
    import torch

    from core.encoder.model import Encoder, EncoderConfig, EncoderForMaskedLM

    cfg = EncoderConfig(vocab_size=50, dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=16)
    torch.manual_seed(0)
    alone = Encoder(cfg).state_dict()
    torch.manual_seed(0)
    with_head = EncoderForMaskedLM(cfg).distilbert.state_dict()
    assert alone.keys() == with_head.keys()
    for k in alone:
        assert torch.equal(alone[k], with_head[k]), k
