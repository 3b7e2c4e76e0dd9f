"""Every message says what happened and every command it suggests works: dangling-symlink
stores, `models --folder` on broken folders, an empty store's search, `why` on a cut text,
repair's count, an interrupted migrate, who holds the lock, and one rule for NUL bytes."""
import re
import shlex
import sqlite3

import pytest

from tests.support.store_contract import needs_milvus
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import hold_writer_lock, make_tiny_bert, one_error

TEXTS = ["the cat sat on the mat", "the dog ran in the park", "a bird flew over the river"]


def suggested(text: str) -> list[str]:
    return shlex.split(re.search(r"`encoderscope ([^`]+)`", text).group(1))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("m") / "m")


@pytest.fixture()
def lines(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return f


@pytest.mark.parametrize("engine", ["faiss", pytest.param("lite", marks=needs_milvus)])
def test_a_dangling_symlink_store_takes_the_ingest_its_message_suggests(tmp_path, model, lines,
                                                                        capsys, engine):
    (tmp_path / "link").symlink_to(tmp_path / "not-yet" / "store")
    store = f"milvus-lite:{tmp_path / 'link'}" if engine == "lite" else str(tmp_path / "link")
    code, _, err = cli(capsys, "search", "cat", "--store", store)
    msg = one_error(code, err)
    argv = [str(lines) if a == "FILE" else a for a in re.search(r"\(encoderscope ([^)]+)\)",
                                                                msg).group(1).split()]
    code, out, err = cli(capsys, *argv, "--model", model, "--quiet")
    assert code == 0 and "added 3" in out, err
    assert (tmp_path / "not-yet" / "store").is_dir()


def test_models_folder_says_unusable_for_folders_that_cannot_load(tmp_path, model, capsys):
    import json
    import shutil
    cut = tmp_path / "cut"
    shutil.copytree(model, cut)
    with open(cut / "model.safetensors", "r+b") as f:
        f.truncate(2000)
    wide = tmp_path / "wide"
    shutil.copytree(model, wide)
    cfg = json.loads((wide / "config.json").read_text())
    cfg["intermediate_size"] = 80
    (wide / "config.json").write_text(json.dumps(cfg))
    code, out, _ = cli(capsys, "models", "--folder", cut, "--folder", wide, "--folder", model)
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip() and line[0] != " "}
    assert " unusable " in rows[str(cut)] and "cannot read the weights" in out
    assert " unusable " in rows[str(wide)] and "does not fit its weights" in out
    assert " available " in rows[str(model)]
    for broken in (cut, wide):
        code, _, err = cli(capsys, "embed", "the cat", "--model", broken)
        one_error(code, err)


def test_search_on_an_empty_store_is_an_error_that_suggests_an_ingest_that_works(
        tmp_path, model, lines, capsys):
    from core.encoder.backends import get_backend
    from index.opening import open_store
    open_store(tmp_path / "s", writable=True, create=True,
               fingerprint=get_backend(str(model)).fingerprint("mean")).close()
    code, out, err = cli(capsys, "search", "cat", "--store", tmp_path / "s")
    msg = one_error(code, err)
    assert out == "" and "holds no sentences" in msg
    argv = [str(lines) if a == "FILE" else a for a in suggested(msg)]
    code, out, err = cli(capsys, *argv, "--quiet")
    assert code == 0 and "added 3" in out, err
    code, out, _ = cli(capsys, "search", TEXTS[0], "--store", tmp_path / "s", "-k", "1")
    assert code == 0 and TEXTS[0] in out


def test_why_says_when_a_text_was_cut(model, capsys):
    long = " ".join(["the cat sat on the mat"] * 40)         # > 128 tokens, the tiny model's max
    code, _, err = cli(capsys, "why", "the cat", long, "--model", model)
    assert code == 0 and "the text is longer than the 128 tokens" in err
    code, _, err = cli(capsys, "why", "the cat", "the dog", "--model", model)
    assert code == 0 and "longer than" not in err


def test_repair_counts_only_the_rows_it_verified(tmp_path, model, capsys):
    many = [f"the {a} {b} sat" for a in ("cat", "dog", "bird", "fish") for b in ("mat", "tree", "park")]
    (tmp_path / "a.txt").write_text("\n".join(many) + "\n", encoding="utf-8")
    cli(capsys, "ingest", tmp_path / "a.txt", "--model", model, "--store", tmp_path / "s", "--quiet")
    with sqlite3.connect(tmp_path / "s" / "store.db") as c:
        c.execute("UPDATE sentences SET text = 'the cat sat tampered' WHERE id IN (2, 5)")
    code, _, err = cli(capsys, "info", "--repair", "--store", tmp_path / "s")
    assert code == 0 and "set aside 2 damaged rows" in err
    assert f"ok: {len(many) - 2} sentences verified (the 2 set aside not counted)" in err


def test_an_interrupted_migrate_leaves_its_destination_marked_until_a_rerun_verifies_it(
        tmp_path, model, lines, capsys, monkeypatch):
    import index.corpus.migrate as migrate
    cli(capsys, "ingest", lines, "--model", model, "--store", tmp_path / "src", "--quiet")

    def killed(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(migrate, "_verify", killed)
    code, _, _ = cli(capsys, "migrate", "--from", tmp_path / "src", "--to", tmp_path / "dst")
    assert code == 130
    monkeypatch.undo()
    code, out, err = cli(capsys, "info", "--store", tmp_path / "dst")
    assert code == 0 and "INCOMPLETE" in out and "incomplete copy" in err
    code, out, _ = cli(capsys, "info", "--json", "--store", tmp_path / "dst")
    assert '"complete": false' in out
    code, _, err = cli(capsys, *suggested(err))
    assert code == 0, err
    code, out, err = cli(capsys, "info", "--store", tmp_path / "dst")
    assert "INCOMPLETE" not in out and "incomplete" not in err


def test_the_lock_message_names_the_app_that_holds_the_store(tmp_path, model, lines, capsys):
    cli(capsys, "ingest", lines, "--model", model, "--store", tmp_path / "s", "--quiet")
    holder = hold_writer_lock(tmp_path / "s", "gui")
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = cli(capsys, "remove", "1", "--store", tmp_path / "s")
        msg = one_error(code, err)
        assert f"the Encoderscope app (process {holder.pid})" in msg and "close" in msg
        assert "wait for it to finish" not in msg
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("where", [10, 20_000])     # in the first 8 KiB, and far past it
def test_a_nul_byte_refuses_the_file_wherever_it_is(tmp_path, model, capsys, where):
    body = ("the cat sat on the mat\n" * (where // 23 + 1)).encode()
    f = tmp_path / "n.txt"
    f.write_bytes(body[:where] + b"\0" + body[where:])
    code, out, err = cli(capsys, "ingest", f, "--model", model, "--store", tmp_path / "s",
                         "--quiet")
    assert "binary file" in one_error(code, err) and not (tmp_path / "s").exists()
