"""Bad input through the command line: every case gives one `error:` line (exit 2) or the right
result, never a traceback. Files are read by core/readers.py (its own rules: test_readers.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.tiny_models import cli_command, make_tiny_bert, make_tiny_distilbert
from tests.support.tiny_models import run_cli as cli

WORDS = ["the cat sat on the mat .", "a dog ran in the park ."]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_distilbert(tmp_path_factory.mktemp("tiny") / "tiny", mlm=False)


def _files(d: Path) -> dict:
    """name -> (path, extra ingest args, what ingest must say: an error or the summary)."""
    shutil.copy(shutil.which("ls"), d / "ls.txt")
    (d / "empty.txt").write_bytes(b"")
    (d / "latin1.txt").write_bytes("café au lait\nnaïve idea\n".encode("latin-1"))
    (d / "mixed.txt").write_bytes(("café au lait\n" + "\n".join(WORDS)).encode("latin-1"))
    (d / "utf16.txt").write_bytes("\n".join(WORDS).encode("utf-16"))
    (d / "crlf.txt").write_bytes("\r\n".join(WORDS).encode("utf-8") + b"\r\n")
    (d / "huge.txt").write_text(WORDS[0] + "\n" + "word " * 300_000 + "\n" + WORDS[1] + "\n", encoding="utf-8")
    (d / "symbols.txt").write_text("---\n" + WORDS[0] + "\n***\n", encoding="utf-8")
    (d / "short.csv").write_text("id,text\n1," + WORDS[0] + "\n2\n3," + WORDS[1] + "\n", encoding="utf-8")
    (d / "nocol.csv").write_text("id,label\n1,x\n", encoding="utf-8")
    (d / "bad.jsonl").write_text(json.dumps({"text": WORDS[0]}) + "\n{oops\n" + json.dumps({"x": 1}) + "\n"
                                 + json.dumps({"text": WORDS[1]}) + "\n", encoding="utf-8")
    (d / "allbad.jsonl").write_text("{oops\n[1, 2]\n", encoding="utf-8")
    return {
        "empty.txt": ("error", "has no text lines"),
        "ls.txt": ("error", "binary file"),
        "latin1.txt": ("error", "--encoding latin-1"),
        "mixed.txt": ("ok", "added 2, duplicates 0, skipped 1 (blank 0, unreadable 1)"),
        "utf16.txt": ("ok", "added 2, duplicates 0, skipped 0"),
        "crlf.txt": ("ok", "added 2, duplicates 0, skipped 0"),
        "huge.txt": ("ok", "added 2, duplicates 0, skipped 1 (blank 0, unreadable 1)"),
        "symbols.txt": ("ok", "added 1, duplicates 0, skipped 2 (blank 0, unreadable 0, no letter or digit 2)"),
        "short.csv": ("ok", "added 2, duplicates 0, skipped 1 (blank 0, unreadable 1)"),
        "nocol.csv": ("error", "--column"),
        "bad.jsonl": ("ok", "added 2, duplicates 0, skipped 2 (blank 0, unreadable 2)"),
        "allbad.jsonl": ("error", "nothing to ingest"),
    }


def test_bad_input_table_for_ingest(tmp_path, tiny, capsys):
    for name, (kind, says) in _files(tmp_path).items():
        store = tmp_path / f"store-{name}"
        rc, out, err = cli(["ingest", tmp_path / name, "--store", store, "--model", tiny, "--quiet"], capsys)
        if kind == "error":
            assert rc == 2 and len(error_lines(err)) == 1 and says in err, (name, err)
            assert not store.exists() or "holds 0" in out, name
        else:
            assert rc == 0 and says in out and not error_lines(err), (name, out, err)
            if name == "mixed.txt":
                assert "mixed.txt:1: not valid UTF-8 (byte 0xe9 at column 4)" in err
                assert "note: 1 line(s) could not be read as UTF-8" in err and "--encoding latin-1" in err
            rc, out, err = cli(["search", WORDS[0], "--store", store, "-k", "1", "--json"], capsys)
            assert json.loads(out)["results"][0]["text"] == WORDS[0], name      # exact text, no \r


def test_bad_input_table_for_embed(tmp_path, tiny, capsys):
    files = _files(tmp_path)
    expect = {"utf16.txt": 2, "crlf.txt": 2, "symbols.txt": 1}
    for name in ("empty.txt", "ls.txt", "latin1.txt", "utf16.txt", "crlf.txt", "huge.txt", "symbols.txt"):
        rc, out, err = cli(["embed", "--file", tmp_path / name, "--model", tiny, "--json"], capsys)
        if name in expect:
            assert rc == 0 and len(json.loads(out)["vectors"]) == expect[name], (name, err)
        else:
            assert rc == 2 and len(error_lines(err)) == 1, (name, err)
    assert "empty.txt has no text lines" in cli(["embed", "--file", tmp_path / "empty.txt"], capsys)[2]
    err = cli(["embed", "--file", tmp_path / "huge.txt", "--model", tiny], capsys)[2]
    assert "huge.txt, line 2" in err and "split it" in err
    assert files


def test_latin1_corpus_trains_with_encoding(tmp_path, capsys):
    (tmp_path / "c.txt").write_bytes(("\n".join(f"sentence number {i} about café life ." for i in range(40)))
                                     .encode("latin-1"))
    argv = ["train", "--corpus", tmp_path / "c.txt", "--out", tmp_path / "run", "--steps", "1",
            "--layers", "1", "--dim", "16", "--heads", "2", "--ffn", "32", "--no-progress"]
    rc, _out, err = cli(argv, capsys)
    assert rc == 2 and "line 1" in err and "--encoding latin-1" in err and len(error_lines(err)) == 1
    rc, _out, err = cli(argv + ["--encoding", "latin-1"], capsys)
    assert rc == 0, err


def test_inspect_says_how_many_tokens_were_cut_without_a_transformers_warning(tmp_path):
    """Subprocess: transformers' own warning goes to the real stderr (verbosity at warning)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="warning")
    p = subprocess.run([*cli_command(), "inspect", "word " * 600], capture_output=True, text=True, env=env, check=False,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert "602 tokens long" in p.stderr and "the last 90 tokens were cut" in p.stderr
    assert "Token indices sequence length" not in p.stderr and "indexing errors" not in p.stderr


def _unsafe_bin_folder(root: Path) -> tuple[Path, Path]:
    import torch
    folder = make_tiny_bert(root / "evil", mlm=False, weights_file="pytorch_model.bin")
    marker = root / "code-ran"
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    torch.save({**state, "trap": _Trap(marker)}, folder / "pytorch_model.bin")
    return folder, marker


class _Trap:
    """Unpickling this creates a file: what a hostile pytorch_model.bin could do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (Path(self.path),)


def test_unsafe_bin_is_refused_plainly_and_listed_as_refused(tmp_path, capsys):
    folder, marker = _unsafe_bin_folder(tmp_path)
    safe = make_tiny_bert(tmp_path / "safe", mlm=False, weights_file="pytorch_model.bin")
    rc, out, err = cli(["embed", "hi", "--model", folder], capsys)
    assert rc == 2 and len(error_lines(err)) == 1
    assert "refused for safety" in err and "code" in err and "safetensors" in err
    assert "weights_only" not in err and "PyTorch 2.6" not in err
    rows = {Path(r["name"]).name: r for r in
            json.loads(cli(["models", "--folder", folder, "--folder", safe, "--json"], capsys)[1])["models"]}
    assert rows["evil"]["available"] is False and rows["evil"]["refused"] == "unsafe pickle"
    assert rows["safe"]["available"] is True
    out = cli(["models", "--folder", folder], capsys)[1]
    assert "refused: unsafe pickle" in next(line for line in out.splitlines() if "evil" in line)
    assert not marker.exists(), "reading the .bin ran its code"


def test_suggested_conversion_writes_safetensors_that_load(tmp_path, capsys):
    """The refusal's snippet, run by whoever holds the model in memory, gives a file we read."""
    import re

    import torch
    folder, _ = _unsafe_bin_folder(tmp_path)
    err = cli(["embed", "hi", "--model", folder], capsys)[2]
    snippet = re.search(r'python -c "([^"]+)"', err).group(1)
    safe = make_tiny_bert(tmp_path / "fixed", mlm=False, weights_file="pytorch_model.bin")
    model = torch.nn.Module()
    state = torch.load(safe / "pytorch_model.bin", weights_only=True)
    model.state_dict = lambda: state
    (safe / "pytorch_model.bin").unlink()
    cwd = os.getcwd()
    os.chdir(safe)
    try:
        exec(snippet, {"model": model})     # noqa: S102 - the message's own one-liner
    finally:
        os.chdir(cwd)
    rc, _out, err = cli(["embed", "hi", "--model", safe, "--json"], capsys)
    assert rc == 0, err


def test_help_says_the_duplicate_rule_and_the_store_defaults(capsys):
    from app.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    ingest = " ".join(sub["ingest"].format_help().split())
    assert "stored once" in ingest and "after trimming" in ingest
    search = " ".join(sub["search"].format_help().split())
    assert "default: the store's)" in search and "(default: mean)" not in search
