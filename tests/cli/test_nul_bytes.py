"""A file with NUL bytes is refused with advice that is true of its bytes: utf-16 only for bytes
that read as UTF-16 text, a compressed or binary file named as what it is, and a file given
as UTF-16 that is plainly 8-bit text refused rather than stored as mojibake. Every encoding a
message advises is then given, and works."""
import gzip
import re

import pytest

from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert, one_error

LINES = ["the cat sat on the mat", "the dog ran in the park"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("m") / "m")


def ingest(capsys, f, model, store, *more):
    return cli(capsys, "ingest", f, "--model", model, "--store", store, "--quiet", *more)


@pytest.mark.parametrize("even", [True, False])
def test_ascii_text_with_a_stray_nul_is_never_advised_utf16(tmp_path, model, capsys, even):
    body = "hello world\x00and more text\nsecond line here\n"
    if (len(body) % 2 == 0) != even:
        body = "a" + body
    f = tmp_path / "nul.txt"
    f.write_bytes(body.encode())
    assert (f.stat().st_size % 2 == 0) == even
    msg = one_error(*ingest(capsys, f, model, tmp_path / "s")[::2])
    assert "binary" in msg and "utf-16" not in msg.lower(), msg
    # given as utf-16 anyway: refused, never one row of CJK mojibake
    code, out, err = ingest(capsys, f, model, tmp_path / "s", "--encoding", "utf-16")
    assert code == 2 and "added" not in out, out
    assert not (tmp_path / "s" / "store.db").exists()


@pytest.mark.parametrize("given", [None, "utf-16", "latin-1"])
def test_gzip_data_is_named_as_compressed_whatever_encoding_is_given(tmp_path, model, capsys, given):
    f = tmp_path / "g.txt"
    f.write_bytes(gzip.compress("\n".join(LINES * 50).encode()))
    code, _, err = ingest(capsys, f, model, tmp_path / "s", *(["--encoding", given] if given else []))
    msg = one_error(code, err)
    assert "gzip-compressed data" in msg and "not a text file" in msg and "utf-16" not in msg, msg
    # the way out it names: the text inside
    (tmp_path / "plain.txt").write_bytes(gzip.decompress(f.read_bytes()))
    code, out, err = ingest(capsys, tmp_path / "plain.txt", model, tmp_path / "s")
    assert code == 0 and "added 2" in out, err


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_mark_is_advised_utf16_and_the_advice_works(tmp_path, model, capsys, codec):
    f = tmp_path / "u.txt"
    f.write_bytes(("\n".join(LINES) + "\n").encode(codec))
    msg = one_error(*ingest(capsys, f, model, tmp_path / "s")[::2])
    encoding = re.search(r"give its encoding, (\S+)$", msg).group(1)
    assert encoding == "utf-16"
    code, out, err = ingest(capsys, f, model, tmp_path / "s", "--encoding", encoding)
    assert code == 0 and "added 2" in out, err
    code, out, _ = cli(capsys, "search", "cat sat", "-k", "1", "--store", tmp_path / "s")
    assert "the cat sat on the mat" in out


def test_plain_text_given_as_utf16_is_refused_and_the_advice_works(tmp_path, model, capsys):
    f = tmp_path / "plain.txt"
    f.write_text("\n".join(LINES) + "\n", encoding="ascii")
    msg = one_error(*ingest(capsys, f, model, tmp_path / "s", "--encoding", "utf-16")[::2])
    assert "is not UTF-16 text" in msg and "without the utf-16 encoding" in msg
    code, out, err = ingest(capsys, f, model, tmp_path / "s")
    assert code == 0 and "added 2" in out, err


def test_utf16_cjk_text_without_a_mark_still_reads_when_given(tmp_path, model, capsys):
    """The refusal of 8-bit text given as UTF-16 never refuses real UTF-16 text without a mark."""
    f = tmp_path / "zh.txt"
    f.write_bytes("上海的猫坐在垫子上\n一只狗在公园里跑\n".encode("utf-16-le"))
    code, out, err = ingest(capsys, f, model, tmp_path / "s", "--encoding", "utf-16")
    assert code == 0 and "added 2" in out, err
