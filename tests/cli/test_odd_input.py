"""Odd input is one `error:` line or the right result, never a traceback: lone surrogates in
JSONL, bytes that are not UTF-8 in arguments, UTF-16 without a byte-order mark, ids past 2^63."""
import codecs
import json

import pytest

from app.cli import main
from core.readers import collect, read_file
from tests.support.tiny_models import make_tiny_bert

LINES = ["the cat sat on the mat", "the dog ran in the park"]


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("m") / "m")


def test_a_lone_surrogate_in_jsonl_skips_its_line_and_keeps_the_rest(tmp_path, model, capsys):
    f = tmp_path / "a.jsonl"
    f.write_text('{"text": "the cat sat"}\n{"text": "bad \\ud800 half"}\n"the dog ran"\n'
                 '{"text": "tail \\udcff"}\n', encoding="utf-8")
    got = collect(read_file(f))
    assert [s.text for s in got.sentences] == ["the cat sat", "the dog ran"]
    assert [b.row for b in got.bad] == [2, 4] and "surrogate" in got.bad[0].reason
    code, out, err = cli(capsys, "ingest", f, "--model", model, "--store", tmp_path / "s", "--quiet")
    assert code == 0 and "added 2" in out and f"{f}:2: holds a lone surrogate" in err


def test_a_jsonl_line_nested_too_deeply_skips_that_line_and_keeps_the_rest(tmp_path, model,
                                                                          capsys):
    f = tmp_path / "deep.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    f.write_text(f'{{"text": "the cat sat"}}\n{deep}\n{{"text": "the dog ran"}}\n',
                 encoding="utf-8")
    code, out, err = cli(capsys, "ingest", f, "--model", model, "--store", tmp_path / "s",
                         "--quiet")
    assert code == 0 and "added 2" in out, err
    assert f"{f}:2: JSON nested too deeply" in err


@pytest.mark.parametrize("argv", [["search", "\udcff\udcfe cat", "--store", "S"],
                                  ["embed", "caf\udce9"],
                                  ["why", "the cat", "\udcffdog", "--store", "S"]])
def test_argument_bytes_that_are_not_utf8_are_one_error_line(tmp_path, capsys, argv):
    """Python hands such bytes over as lone surrogates (surrogateescape)."""
    argv = [str(tmp_path / "s") if a == "S" else a for a in argv]
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == "" and "not valid UTF-8" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("codec, given", [("utf-16-le", "utf-16"), ("utf-16-be", "utf-16"),
                                          ("utf-16-be", "utf-16-be"), ("utf-32-le", "utf-32")])
def test_utf16_without_bom_reads_with_the_encoding_the_refusal_suggests(tmp_path, model, capsys,
                                                                        codec, given):
    f = tmp_path / "u.txt"
    f.write_bytes(codecs.encode("\n".join(LINES) + "\n", codec))
    code, _, err = cli(capsys, "ingest", f, "--model", model, "--store", tmp_path / "s", "--quiet")
    assert code == 2 and f"give its encoding, {given[:6]}" in err
    assert [s.text for s in collect(read_file(f, encoding=given)).sentences] == LINES
    code, out, err = cli(capsys, "ingest", f, "--encoding", given, "--model", model,
                         "--store", tmp_path / "s", "--quiet")
    assert code == 0 and "added 2" in out, err
    code, out, _ = cli(capsys, "embed", "--file", f, "--encoding", given, "--model", model, "--json")
    assert code == 0 and len(json.loads(out)["vectors"]) == 2


def test_remove_of_an_id_past_two_to_the_63_is_an_unknown_id(tmp_path, model, capsys):
    (tmp_path / "a.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    cli(capsys, "ingest", tmp_path / "a.txt", "--model", model, "--store", tmp_path / "s", "--quiet")
    code, out, err = cli(capsys, "remove", str(1 << 63), "1", "--store", tmp_path / "s")
    assert "removed 1 sentence; the store holds 1" in out
    assert code == 2 and err.startswith(f"error: no sentence with id {1 << 63}")
