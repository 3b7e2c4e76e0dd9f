"""`encoderscope train`: flags, the final JSON line, errors, resume, Ctrl-C saves a checkpoint."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.paths import ROOT
from tests.support.train_corpus import write_corpus

TINY = ["--layers", "1", "--dim", "32", "--heads", "2", "--ffn", "64", "--threads", "1", "--precision", "fp32",
        "--batch-size", "16", "--lr", "3e-3", "--max-length", "24", "--eval-sentences", "50"]


def run_cli(argv):
    from app.cli import main
    return main(argv)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("cli") / "gen.txt", n=600)


def test_train_prints_a_json_summary_and_resumes(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    rc = run_cli(["train", "--corpus", str(corpus), "--out", str(out), "--steps", "40", "--objective", "mlm",
                  "--init", "fresh", "--tokenizer", "word", "--positions", "sinusoidal", "--norm", "post",
                  "--device", "cpu", "--seed", "1", "--no-progress", *TINY])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    for key in ("steps", "train_loss", "heldout_mlm_loss", "heldout_mlm_accuracy", "unigram_accuracy", "device"):
        assert key in summary
    assert summary["steps"] == 40 and summary["device"].startswith("cpu") and summary["precision"] == "fp32"
    assert "held-out MLM loss" in captured.err and "device cpu" in captured.err
    meta = json.loads((out / "encoderscope.json").read_text())
    assert meta["config"]["positions"] == "sinusoidal" and meta["config"]["norm"] == "post"

    rc = run_cli(["train", "--resume", str(out), "--steps", "60", "--no-progress"])
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 0 and again["steps"] == 60 and again["steps_this_run"] == 20 and again["out"] == str(out)


@pytest.mark.parametrize("argv, message", [
    (["--out", "X"], "--corpus"),
    (["--corpus", "missing.txt", "--out", "X"], "does not exist"),
    (["--corpus", "CORPUS", "--out", "X", "--dim", "30", "--heads", "4"], "divisible"),
    (["--resume", "nowhere"], "cannot resume"),
    (["--corpus", "CORPUS", "--out", "X", "--log-every", "0"], "log_every"),
    (["--corpus", "CORPUS", "--out", "X", "--dropout", "1.5"], "dropout"),
    (["--corpus", "CORPUS", "--out", "X", "--objective", "simcse", "--dropout", "0"], "dropout > 0"),
])
def test_errors_are_one_line(corpus, tmp_path, capsys, argv, message):
    argv = [str(corpus) if a == "CORPUS" else str(tmp_path / a) if a in ("X", "missing.txt", "nowhere") else a
            for a in argv]
    rc = run_cli(["train", *argv, "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err
    assert [l for l in err.splitlines() if l.startswith("error: ")]


def test_ctrl_c_saves_a_checkpoint(corpus, tmp_path):
    out = tmp_path / "interrupted"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "train", "--corpus", str(corpus), "--out", str(out),
         "--steps", "100000", "--log-every", "5", "--eval-every", "100000", "--checkpoint-every", "5",
         "--no-progress", *TINY],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    line = ""
    while time.time() < deadline and "checkpoint at step" not in line:   # really mid-training
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
    assert "checkpoint at step 5" in line, line
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["cancelled"] and 5 <= summary["steps"] < 100000
    assert json.loads((out / "trainer_state.json").read_text())["step"] == summary["steps"]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "no rng"])
def test_resume_from_a_damaged_trainer_state_is_one_error_line_and_its_advice_runs(corpus, tmp_path, capsys, damage):
    from safetensors.torch import load, save
    out = tmp_path / "run"
    assert run_cli(["train", "--corpus", str(corpus), "--out", str(out), "--steps", "4", "--objective", "mlm",
                    "--init", "fresh", "--tokenizer", "word", "--device", "cpu", "--no-progress", *TINY]) == 0
    state = out / "trainer_state.safetensors"
    data = state.read_bytes()
    if damage == "truncated":
        state.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        state.write_bytes(b"\x00" * 64)
    else:
        state.write_bytes(save({k: v for k, v in load(data).items() if not k.startswith("rng.")}))
    capsys.readouterr()
    rc = run_cli(["train", "--resume", str(out), "--steps", "8", "--no-progress"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert rc == 2 and "Traceback" not in err and len(errors) == 1, err
    assert "trainer_state.safetensors is damaged" in errors[0] and f"--init {out}" in errors[0], errors[0]
    # what it advises: a new run from the weights kept
    rc = run_cli(["train", "--init", str(out), "--corpus", str(corpus), "--out", str(tmp_path / "again"),
                  "--steps", "2", "--no-progress", "--threads", "1"])
    assert rc == 0, capsys.readouterr().err
