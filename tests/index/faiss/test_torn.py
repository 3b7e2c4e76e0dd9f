"""A store whose creation was cut off (kill -9 just as store.db appears) is no store yet: every
command says so and names the ingest that creates it, and that ingest, whitened or not, creates
it in place. A store whose tables are only in its write-ahead log is never taken for one."""
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.support.paths import child_env
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, one_error

TEXTS = ["the cat sat on the mat", "the dog ran in the park", "a bird flew over the river"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("m") / "m")


@pytest.fixture()
def lines(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return f


def torn_faiss(folder, state):
    """The folder as SQLite leaves it at each step of a creation before its first commit."""
    folder.mkdir()
    (folder / "lock").write_text("999999\n")        # a writer that is gone
    db = folder / "store.db"
    if state == "empty":                # connect + first query: SQLite made the file
        db.write_bytes(b"")
        return
    conn = sqlite3.connect(db)          # journal_mode=WAL: one header page, no table
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    if state == "cut":                  # cut inside the header being written
        db.write_bytes(db.read_bytes()[:40])


def suggested(message: str, lines, model) -> list[str]:
    words = shlex.split(re.search(r"\(encoderscope ([^)]+)\)", message).group(1))
    return [str(lines) if w == "FILE" else w for w in words] + ["--model", str(model), "--quiet"]


@pytest.mark.parametrize("whiten", [False, True], ids=["plain", "whiten"])
@pytest.mark.parametrize("state", ["empty", "header", "cut"])
def test_a_torn_faiss_store_is_named_and_the_same_ingest_creates_it(tmp_path, model, lines, capsys,
                                                                    state, whiten):
    store = tmp_path / "s"
    torn_faiss(store, state)
    for command in (["search", "cat"], ["info"], ["info", "--repair"], ["remove", "1"]):
        code, _, err = cli(capsys, *command, "--store", store)
        msg = one_error(code, err)
        assert "half-made by an interrupted first ingest" in msg, (command, msg)
    argv = suggested(msg, lines, model) + (["--whiten"] if whiten else [])
    assert argv[:1] == ["ingest"] and argv[argv.index("--store") + 1] == str(store)
    code, out, err = cli(capsys, *argv)
    assert code == 0 and "added 3" in out, err
    code, out, err = cli(capsys, "search", "cat sat", "-k", "1", "--store", store)
    assert code == 0 and "the cat sat on the mat" in out, err
    assert (store / "manifest.json").exists()
    if whiten:
        assert (store / "whitening.safetensors").exists()


def test_a_creation_still_running_is_not_called_torn(tmp_path, capsys):
    store = tmp_path / "s"
    torn_faiss(store, "empty")
    (store / "lock").write_text(f"{os.getppid()}\n")   # a live process is the writer
    code, _, err = cli(capsys, "search", "cat", "--store", store)
    assert "is being created by process" in one_error(code, err)


def test_tables_only_in_the_write_ahead_log_are_a_store_not_a_torn_one(tmp_path, model, lines, capsys):
    """Killed before its first checkpoint and before its first manifest: store.db is one
    header page, every table and row is in store.db-wal. Nothing may be removed."""
    from index.faiss.torn import torn_at_creation
    from index.opening import store_exists
    made = tmp_path / "made"
    assert cli(capsys, "ingest", lines, "--store", made, "--model", model, "--quiet")[0] == 0
    store = tmp_path / "s"
    store.mkdir()
    conn = sqlite3.connect(made / "store.db")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    src = sqlite3.connect(store / "store.db")
    src.execute("PRAGMA journal_mode=WAL")
    src.execute("PRAGMA wal_autocheckpoint=0")
    for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE type='table' AND sql IS NOT NULL"
                               " AND name NOT LIKE 'sqlite_%'"):
        src.execute(sql)
    src.execute("ATTACH ? AS made", (str(made / "store.db"),))
    src.execute("INSERT INTO sentences SELECT * FROM made.sentences")
    src.execute("INSERT INTO meta SELECT * FROM made.meta")
    src.commit()
    src.execute("DETACH made")
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("store.db", "store.db-wal"):    # as a kill -9 leaves them: no checkpoint
        (copy / name).write_bytes((store / name).read_bytes())
    for log in made.glob("vectors-*.f32"):        # the vector log beside them
        (copy / log.name).write_bytes(log.read_bytes())
    src.close()
    conn.close()
    assert (copy / "store.db").stat().st_size <= 4096 < (copy / "store.db-wal").stat().st_size
    assert not torn_at_creation(copy) and store_exists(copy)
    code, out, err = cli(capsys, "search", "cat sat", "-k", "1", "--store", copy)
    assert code == 0 and "the cat sat on the mat" in out, err


def lite_torn(folder, model, lines, capsys, state):
    if state == "no data":             # killed before Milvus Lite made its collection
        (folder / "milvus.db").mkdir(parents=True)
        (folder / "lock").write_text("999999\n")
        return
    # killed after the collection was made, before the manifest was written
    code, _, err = cli(capsys, "ingest", lines, "--store", f"milvus-lite:{folder}", "--model", model, "--quiet")
    assert code == 0, err
    (folder / "encoderscope-milvus.json").unlink()


@pytest.mark.parametrize("state", ["no data", "no manifest"])
@pytest.mark.parametrize("prefix", ["milvus-lite:", ""], ids=["lite", "folder"])
def test_a_torn_milvus_lite_store_is_named_and_the_same_ingest_creates_it(tmp_path, model, lines, capsys,
                                                                          state, prefix):
    pytest.importorskip("milvus_lite")
    folder = tmp_path / "l"
    lite_torn(folder, model, lines, capsys, state)
    for command in (["search", "cat"], ["info", "--repair"]):
        code, _, err = cli(capsys, *command, "--store", f"{prefix}{folder}")
        msg = one_error(code, err)
        assert "half-made by an interrupted first ingest" in msg, msg
    # whitened vectors need a FAISS folder: said so, and the torn store is left as it was
    code, _, err = cli(capsys, "ingest", lines, "--store", folder, "--model", model, "--quiet", "--whiten")
    assert "cannot be whitened" in one_error(code, err)
    argv = suggested(msg, lines, model)
    code, out, err = cli(capsys, *argv)
    assert code == 0 and "holds 3 sentences" in out, err
    assert (folder / "encoderscope-milvus.json").exists()
    code, out, err = cli(capsys, "search", "cat sat", "-k", "1", "--store", f"milvus-lite:{folder}")
    assert code == 0 and "the cat sat on the mat" in out, err


@pytest.mark.slow
@pytest.mark.parametrize("prefix", ["", "milvus-lite:"], ids=["faiss", "lite"])
def test_kill_9_as_the_store_appears_then_the_same_ingest(tmp_path, model, lines, prefix):
    """Real kill -9 trials: the first ingest is killed the moment its store file appears; the
    same command then creates the store and every text is in it."""
    if prefix:
        pytest.importorskip("milvus_lite")
    env = child_env(os.getcwd())
    for trial in range(3):
        folder = tmp_path / f"s{trial}"
        argv = [sys.executable, "-m", "app.cli", "ingest", str(lines), "--store", f"{prefix}{folder}",
                "--model", str(model), "--quiet"]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        appears = folder / ("milvus.db" if prefix else "store.db")
        deadline = time.monotonic() + 120
        while not appears.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and "holds 3 sentences" in done.stdout, done.stderr
        found = subprocess.run([sys.executable, "-m", "app.cli", "search", "cat sat", "-k", "1",
                                "--store", f"{prefix}{folder}"], env=env, capture_output=True,
                               text=True, timeout=300)
        assert "the cat sat on the mat" in found.stdout, found.stderr
