"""A long command ends within 5 s of SIGTERM or SIGINT, with one line: its work runs in bounded
batches (the Gauss-Legendre nodes in O(n^2), the trace's restored runs sized by memory), and the
signal is seen between them. A real process, a real signal, on minilm."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.support.paths import ROOT, child_env

LONG = ("the old lighthouse keeper walked slowly along the rocky shore every evening , watching the grey "
        "waves break against the cliffs while the gulls circled above the harbour and the fishing boats "
        "came home one by one under a darkening sky")
# the child marks the moment its work starts (the spied function is called just before it), then runs
# the command as `encoderscope` would
CHILD = """
import pathlib, sys
import importlib
module, name, marker = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
mod = importlib.import_module(module)
real = getattr(mod, name)
def spy(*a, **k):
    marker.touch()
    return real(*a, **k)
setattr(mod, name, spy)
from app.cli import main
sys.exit(main(sys.argv[4:]))
"""


def stop_after_start(tmp_path, spied: tuple[str, str], argv: list[str], sig) -> tuple[int, str, float]:
    marker = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *spied, str(marker), *argv], cwd=ROOT, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()[1]
    time.sleep(1.0)                                   # well inside the work
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err, time.monotonic() - sent


@pytest.mark.skipif(sys.platform == "win32", reason="no SIGTERM on Windows")
def test_attribute_with_many_steps_ends_within_5_s_of_sigterm(tmp_path):
    code, err, took = stop_after_start(
        tmp_path, ("core.intervene.attribute", "baseline_words"),
        ["attribute", LONG, "--to", "a sailor at sea", "--model", "minilm", "--steps", "4096", "--device", "cpu"],
        signal.SIGTERM)
    assert code == 128 + signal.SIGTERM and err.strip().splitlines() == ["terminated (SIGTERM)"], err
    assert took < 5.0, f"{took:.1f} s after SIGTERM"


def test_a_trace_with_many_samples_ends_within_5_s_of_sigint(tmp_path):
    code, err, took = stop_after_start(
        tmp_path, ("core.intervene.trace", "rows_per_batch"),
        ["patch", LONG, "--trace", "lighthouse", "--samples", "1000", "--model", "minilm", "--device", "cpu"],
        signal.SIGINT)
    assert code == 130 and err.strip().splitlines() == ["interrupted"], err
    assert took < 5.0, f"{took:.1f} s after SIGINT"
