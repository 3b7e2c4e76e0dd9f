"""Every command an error message suggests works as written: each test provokes the message
through the `encoderscope` command line (in this process: the same parser and handlers as the
console script), cuts the `command` out of its text and runs it.

The messages that suggest commands (grep "encoderscope " in core/ index/ app/): the model and
pooling mismatch of search/ingest (app/cli/store.py, index/store/base.py), the store's repair and "no
store" hints (index/faiss/store.py), the encoding hint (core/readers.py), fill-mask's "train one"
(core/encoder/fillmask.py).
"""
import re
import shlex
from types import SimpleNamespace

import pytest

from tests.support.tiny_models import make_tiny_distilbert, run_cli

SENTENCES = ["the cat sat on the mat .", "a dog ran in the park .", "the bird sang a song .",
             "we like to read books .", "it rained all day long ."]


@pytest.fixture
def run(capsys, monkeypatch):
    """run(ARGS, cwd) -> (returncode, stdout, stderr) of `encoderscope ARGS` started in cwd."""
    def call(args, cwd, check=False):
        monkeypatch.chdir(cwd)
        rc, out, err = run_cli(args, capsys)
        assert "Traceback" not in err, err
        if check:
            assert rc == 0, err
        return SimpleNamespace(returncode=rc, stdout=out, stderr=err)
    return call


def suggested(message: str) -> list[list[str]]:
    """The `encoderscope ...` commands in a message, as argument lists (without the program)."""
    commands = [shlex.split(c)[1:] for c in re.findall(r"`(encoderscope [^`]+)`", message)]
    assert commands, f"no command suggested in: {message}"
    return commands


def one_error_line(p) -> str:
    lines = [line for line in p.stderr.splitlines() if line.startswith("error: ")]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return (make_tiny_distilbert(root / "tiny-a", mlm=False, seed=0),
            make_tiny_distilbert(root / "tiny-b", mlm=False, seed=1))


@pytest.fixture()
def store(tmp_path, models, run):
    (tmp_path / "s.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    run(["ingest", "s.txt", "--model", models[0], "--store", "store", "--quiet"], tmp_path, check=True)
    return tmp_path / "store"


def test_search_with_another_pooling_suggests_commands_that_work(tmp_path, store, models, run):
    p = run(["search", SENTENCES[1], "--pooling", "cls", "--store", "store"], tmp_path)
    message = one_error_line(p)
    assert "--model" not in message.split("`")[0], message          # none was given: not named
    assert "Store" not in message and "rebuild)" not in message     # no internal class names
    keep, rebuild = suggested(message)
    out = run(keep, tmp_path, check=True).stdout
    assert out.splitlines()[0].endswith(SENTENCES[1])              # the store's own pooling
    run(rebuild, tmp_path, check=True)                              # re-embeds with cls pooling
    out = run(["search", SENTENCES[1], "--pooling", "cls", "--store", "store", "-k", "1"], tmp_path,
              check=True).stdout
    assert out.strip().endswith(SENTENCES[1])
    assert "cls pooling" in run(["info", "--store", "store"], tmp_path, check=True).stdout


def test_search_with_another_model_suggests_commands_that_work(tmp_path, store, models, run):
    p = run(["search", SENTENCES[2], "--model", models[1], "--store", "store"], tmp_path)
    keep, rebuild = suggested(one_error_line(p))
    run(keep, tmp_path, check=True)
    run(rebuild, tmp_path, check=True)
    out = run(["search", SENTENCES[2], "--model", models[1], "--store", "store", "-k", "1"], tmp_path,
              check=True).stdout
    assert out.strip().endswith(SENTENCES[2])


def test_ingest_with_another_model_suggests_a_rebuild_that_works(tmp_path, store, models, run):
    (tmp_path / "more.txt").write_text("one more line here .\n", encoding="utf-8")
    p = run(["ingest", "more.txt", "--model", models[1], "--store", "store", "--quiet"], tmp_path)
    message = one_error_line(p)
    assert "without --model" in message
    [rebuild] = suggested(message)
    run(rebuild, tmp_path, check=True)
    run(["ingest", "more.txt", "--model", models[1], "--store", "store", "--quiet"], tmp_path, check=True)


def test_rebuild_alone_needs_a_store(tmp_path, run):
    p = run(["ingest", "--rebuild", "--store", "nothing-here"], tmp_path)
    assert "no store" in one_error_line(p)
    assert "FILE" in one_error_line(run(["ingest", "--store", "nothing-here"], tmp_path))


def test_damaged_index_suggests_a_repair_that_works(tmp_path, store, models, run):
    # hnsw: a kind with a snapshot file (a flat index of a format 3 store has none)
    run(["ingest", "s.txt", "--model", models[0], "--store", "store", "--index", "hnsw", "--quiet"],
        tmp_path, check=True)
    index = next(p for p in store.iterdir() if p.name.startswith("index") or p.suffix == ".faiss")
    index.unlink()
    message = one_error_line(run(["search", "cat", "--store", "store"], tmp_path))
    [repair] = suggested(message)
    assert "--store" in repair
    run(repair, tmp_path, check=True)
    run(["search", SENTENCES[0], "--store", "store", "-k", "1"], tmp_path, check=True)


def test_no_store_suggests_an_ingest_that_works(tmp_path, run):
    (tmp_path / "a.txt").write_text("hello there\n", encoding="utf-8")
    message = one_error_line(run(["search", "x", "--store", "missing"], tmp_path))
    command = re.search(r"\((encoderscope ingest FILE [^)]+)\)", message).group(1)
    run(shlex.split(command.replace("FILE", "a.txt"))[1:], tmp_path, check=True)


@pytest.mark.parametrize("lite", [False, True])
def test_no_store_at_a_file_or_a_foreign_folder_says_what_is_there(tmp_path, models, run, lite):
    # "ingest some files first" there would be refused: say what is there, and where a store can go
    (tmp_path / "a.txt").write_text("hello there\n", encoding="utf-8")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.md").write_text("mine\n", encoding="utf-8")
    prefix = "milvus-lite:" if lite else ""
    for where, said in (("a.txt", "is a plain file"), ("notes", "holds other files (todo.md) and no store")):
        for command in (["info", "--store", prefix + where],
                        ["ablate", "the cat", "--heads", "1.1", "--model", models[0], "--store", prefix + where]):
            message = one_error_line(run(command, tmp_path))
            if command[0] == "info" and where == "a.txt":
                assert "not a store folder" in message       # the store's own words, no advice to ingest
                continue
            assert said in message and "ingest some files first" not in message, message
            suggestion = re.search(r"\((encoderscope ingest FILE [^)]+)\)", message).group(1)
            assert suggestion.endswith(f"--store {prefix}NEW_FOLDER")
    command = shlex.split(suggestion.replace("FILE", "a.txt").replace("NEW_FOLDER", "fresh"))[1:]
    run(command + ["--model", models[0], "--quiet"], tmp_path, check=True)      # as suggested, works
    assert (tmp_path / "notes" / "todo.md").read_text(encoding="utf-8") == "mine\n"


def test_not_utf8_suggests_an_encoding_that_works(tmp_path, run):
    (tmp_path / "l.txt").write_bytes("café au lait\nnaïve\n".encode("latin-1"))
    for command in (["embed", "--file", "l.txt"], ["ingest", "l.txt", "--store", "s", "--quiet"]):
        message = one_error_line(run(command, tmp_path))
        assert "l.txt" in message and "line 1" in message
        encoding = re.search(r"add (--encoding \S+)", message).group(1).split()
        p = run(command + encoding, tmp_path, check=True)
    assert "added 2" in p.stdout


@pytest.mark.slow
def test_no_mlm_head_suggests_a_training_that_works(tmp_path, models, run):
    message = one_error_line(run(["fill-mask", "the [MASK] sat .", "--model", models[0]], tmp_path))
    [train] = suggested(message)
    (tmp_path / "YOUR_TEXT.txt").write_text("\n".join(SENTENCES * 4), encoding="utf-8")
    # As suggested, with 2 steps instead of the default 1,000 (this test's time, not the user's).
    run(train + ["--steps", "2", "--no-progress"], tmp_path, check=True)
    out_dir = re.search(r"--model (\S+)", message).group(1).rstrip(".")
    run(["fill-mask", "the [MASK] sat .", "--model", out_dir], tmp_path, check=True)
