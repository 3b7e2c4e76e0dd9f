"""SIGTERM to a running app closes it as Quit does: exit 0, no traceback, the store's writer
lock released and every committed sentence still there (a real signal to a real window)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.support.paths import ROOT, child_env

pytest.importorskip("PySide6", reason="starts the desktop app, which needs PySide6")
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert


def _locked(folder) -> bool:
    from index.store.durability import WriterLock
    from index.store.errors import StoreLocked
    try:
        WriterLock(folder).acquire().release()
        return False
    except StoreLocked:
        return True


def test_sigterm_closes_the_app_like_quit(tmp_path, capsys):
    model = make_tiny_bert(tmp_path / "m")
    lines = tmp_path / "a.txt"
    lines.write_text("the cat sat on the mat\nthe dog ran in the park\n", encoding="utf-8")
    store = tmp_path / "store"
    code, _, err = cli(capsys, "ingest", lines, "--store", store, "--model", model, "--quiet")
    assert code == 0, err
    env = child_env(QT_QPA_PLATFORM="offscreen", ENCODERSCOPE_DATA_DIR=str(tmp_path / "d"),
                    HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    app = subprocess.Popen([sys.executable, "-m", "app.main", "gui", "--store", str(store)],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not _locked(store) and app.poll() is None:
            time.sleep(0.2)
        assert _locked(store), "the app never opened its store for writing"
        time.sleep(1.0)     # the window and its first jobs are up
        app.send_signal(signal.SIGTERM)
        out, err = app.communicate(timeout=60)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    assert app.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "Terminated" not in err, err[-3000:]
    assert not _locked(store)
    from index.faiss.store import VectorStore
    kept = VectorStore.open(store)
    try:
        assert kept.count() == 2
    finally:
        kept.close()
