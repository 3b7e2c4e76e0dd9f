"""SIGTERM (kill, a shutdown, a job scheduler) stops a command as Ctrl-C does: `ingest` keeps
every committed sentence and says so, `train` saves a checkpoint first."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.cli.test_train import TINY
from tests.support.paths import ROOT, child_env
from tests.support.tiny_models import signal_ingest, stored_rows
from tests.support.train_corpus import write_corpus


def test_sigterm_ends_ingest_saying_what_was_kept(tmp_path):
    from tests.support.tiny_models import make_tiny_bert
    model = make_tiny_bert(tmp_path / "m")
    src = tmp_path / "in.txt"
    words = "cat dog bird fish mat tree river sky house garden park street".split()
    lines = [f"the {a} and the {b} {i}" for i in range(200) for a, b in zip(words, words[1:])]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    cmd = [sys.executable, "-m", "app.cli", "ingest", str(src), "--store", str(store), "--model",
           str(model), "--batch-size", "4", "--quiet"]
    env = child_env()
    code, out, err = signal_ingest(cmd, store, signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    kept = stored_rows(store / "store.db")
    assert kept >= 8 and f"interrupted by SIGTERM: the {kept} sentences committed" in err
    assert f"holds {kept} sentences" in out
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0 and f"duplicates {kept}," in done.stdout, done.stderr


def test_sigterm_saves_a_training_checkpoint(tmp_path):
    corpus = write_corpus(tmp_path / "gen.txt", n=600)
    out = tmp_path / "stopped"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "train", "--corpus", str(corpus), "--out", str(out),
         "--steps", "100000", "--log-every", "5", "--eval-every", "100000", "--no-progress", *TINY],
        cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    # the signal lands once a step event (every 5 steps) is on disk: the run has trained
    metrics, deadline = out / "metrics.jsonl", time.time() + 120
    while time.time() < deadline and proc.poll() is None and not (
            metrics.is_file() and '"kind": "step"' in metrics.read_text(encoding="utf-8")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "SIGTERM: stopping after this step" in stderr, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["cancelled"] and 5 <= summary["steps"] < 100000
    assert json.loads((out / "trainer_state.json").read_text())["step"] == summary["steps"]
    assert (out / "model.safetensors").is_file()
