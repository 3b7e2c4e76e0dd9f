"""The one corpus reader (core/readers.py): its rules, file by file, and round trips written by
the standard library's own writers (csv, json) and read back."""
import csv
import io
import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import InputError
from core.files.text_file import BinaryFile
from core.readers import (
    BadLine,
    Blank,
    NoLetters,
    Sentence,
    collect,
    list_fields,
    read_file,
    read_text,
    read_txt,
)
from tests.support.paths import ROOT


def texts(records):
    return [r.text for r in records if isinstance(r, Sentence)]


def rows(records, kind):
    return [r.row for r in records if isinstance(r, kind)]


def test_txt_csv_jsonl(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"\xef\xbb\xbfone\n\n  two  \n\xff\xfe\nthree")
    (tmp_path / "b.csv").write_bytes(b'id,body\n1,hello\n2,"multi\nline"\n3,\xff\n4,\n5,ok\n')
    (tmp_path / "c.jsonl").write_bytes(b'{"t": "a"}\n{broken\n{"x": 1}\n\n{"t": 5}\n{"t": "b"}\n')
    txt = list(read_file(tmp_path / "a.txt"))
    assert texts(txt) == ["one", "two", "three"]
    assert rows(txt, BadLine) == [4] and rows(txt, Blank) == [2]
    assert "byte 0xff at column 1" in str(next(r for r in txt if isinstance(r, BadLine)))
    csvr = list(read_file(tmp_path / "b.csv", column="body"))
    assert [(r.text, r.row) for r in csvr if isinstance(r, Sentence)] == \
        [("hello", 2), ("multi line", 3), ("ok", 7)]
    assert rows(csvr, BadLine) == [5]
    js = list(read_file(tmp_path / "c.jsonl", field="t"))
    assert texts(js) == ["a", "b"]
    assert rows(js, BadLine) == [2, 3, 5]
    with pytest.raises(InputError, match="no column 'text'"):
        list(read_file(tmp_path / "b.csv", column="text"))
    (tmp_path / "two.csv").write_text("id,label\n1,x\n", encoding="utf-8")
    with pytest.raises(InputError, match="choose the one that holds the text") as e:
        list(read_file(tmp_path / "two.csv"))
    assert "--" not in str(e.value) and e.value.fix == {"kind": "column", "columns": ["id", "label"]}
    (tmp_path / "d.parquet").write_text("x")
    with pytest.raises(InputError, match="unsupported"):
        read_file(tmp_path / "d.parquet")
    with pytest.raises(InputError, match="no such file"):
        read_file(tmp_path / "missing.txt")


def test_default_column_and_field(tmp_path):
    """No column named: 'text' (or sentence, content, body), else the only column; JSONL: the
    same field names, or a JSON string line."""
    (tmp_path / "a.csv").write_text("id,Sentence\n1,Hello there.\n", encoding="utf-8")
    assert texts(read_file(tmp_path / "a.csv")) == ["Hello there."]
    (tmp_path / "b.csv").write_text("only\nOne.\nTwo.\n", encoding="utf-8")
    assert texts(read_file(tmp_path / "b.csv")) == ["One.", "Two."]
    (tmp_path / "c.jsonl").write_text('{"text": "One."}\n"Two."\n{"sentence": "Three."}\n', encoding="utf-8")
    assert texts(read_file(tmp_path / "c.jsonl")) == ["One.", "Two.", "Three."]
    (tmp_path / "d.tsv").write_text("a\tb\ttopic\nthe cat sat down\ta cat was sitting\tpets\n", encoding="utf-8")
    assert texts(read_file(tmp_path / "d.tsv", guess_columns=True)) == ["the cat sat down", "a cat was sitting"]
    with pytest.raises(InputError, match="choose the one that holds the text") as e:
        list(read_file(tmp_path / "d.tsv"))
    assert e.value.fix["kind"] == "column"
    (tmp_path / "e.csv").write_text("id;text\n1;semi, colon\n", encoding="utf-8")   # ; in the header
    assert texts(read_file(tmp_path / "e.csv")) == ["semi, colon"]


def test_crlf_cr_and_quoted_newlines(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\r\ntwo\rthree\n")
    assert texts(read_file(tmp_path / "a.txt")) == ["one", "two", "three"]
    (tmp_path / "b.csv").write_bytes(b'text\r\n"a\r\nb"\r\nc\r\n')
    assert [(r.text, r.row) for r in read_file(tmp_path / "b.csv") if isinstance(r, Sentence)] == \
        [("a b", 2), ("c", 4)]


def test_encodings(tmp_path):
    words = ["héllo wörld", "naïve café"]
    (tmp_path / "l.txt").write_text("\n".join(words), encoding="latin-1")
    got = collect(read_file(tmp_path / "l.txt"))
    assert not got.sentences and len(got.undecodable) == 2 and "byte 0xe9" in got.bad[0].reason
    assert texts(read_file(tmp_path / "l.txt", encoding="latin-1")) == words
    (tmp_path / "u.txt").write_text("\n".join(words), encoding="utf-16")          # with a BOM
    assert texts(read_file(tmp_path / "u.txt")) == words
    (tmp_path / "u.csv").write_text("text\n" + "\n".join(words), encoding="utf-16")
    assert texts(read_file(tmp_path / "u.csv")) == words and list_fields(tmp_path / "u.csv") == ["text"]
    (tmp_path / "le.txt").write_bytes("\n".join(words).encode("utf-16-le"))        # no BOM
    with pytest.raises(BinaryFile, match="utf-16"):
        read_file(tmp_path / "le.txt")
    assert texts(read_file(tmp_path / "le.txt", encoding="utf-16-le")) == words
    (tmp_path / "s.txt").write_bytes(b"\xef\xbb\xbf" + "\n".join(words).encode("utf-8"))
    assert texts(read_file(tmp_path / "s.txt", encoding="utf-8")) == words           # BOM dropped
    with pytest.raises(InputError, match="unknown encoding"):
        read_file(tmp_path / "s.txt", encoding="klingon")


def test_binary_files_are_refused(tmp_path):
    exe = tmp_path / "x.txt"
    shutil.copy(shutil.which("ls"), exe)
    with pytest.raises(BinaryFile, match="binary"):
        read_file(exe)
    (tmp_path / "ctl.txt").write_bytes(bytes(range(1, 9)) * 20 + b"\nabc\n")
    with pytest.raises(BinaryFile, match="control characters"):
        read_txt(tmp_path / "ctl.txt")


def test_lines_without_letters_or_digits_are_not_sentences(tmp_path):
    (tmp_path / "a.txt").write_text("---\nHello.\n\x01\x02\x03 ***\n42\n", encoding="utf-8")
    got = collect(read_file(tmp_path / "a.txt"))
    assert texts(got.sentences) == ["Hello.", "42"] and got.no_letters == 2
    assert [type(r) for r in read_text("...\nok")] == [NoLetters, Sentence]


def test_huge_line_is_a_bad_line(tmp_path):
    (tmp_path / "a.txt").write_text("short one\n" + "word " * 300_000 + "\n", encoding="utf-8")
    got = collect(read_file(tmp_path / "a.txt"))
    assert texts(got.sentences) == ["short one"] and got.bad[0].row == 2 and "split it" in got.bad[0].reason
    (tmp_path / "b.csv").write_text('text\n"' + "long " * 60_000 + '"\nok\n', encoding="utf-8")
    assert [len(t) for t in texts(read_file(tmp_path / "b.csv"))] == [len("long " * 60_000) - 1, 2]


def test_list_fields(tmp_path):
    (tmp_path / "a.csv").write_text("id, body \n1,x\n", encoding="utf-8")
    assert list_fields(tmp_path / "a.csv") == ["id", "body"]
    (tmp_path / "b.jsonl").write_text('{"a": "x", "n": 1}\nbroken\n{"b": "y"}\n', encoding="utf-8")
    assert list_fields(tmp_path / "b.jsonl") == ["a", "b"]
    assert list_fields(tmp_path / "c.txt") == []


# ---- round trips ----------------------------------------------------------------------------------
# Any text without line breaks or control characters; a sentence needs a letter or digit.
LINE = st.text(st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="\u2028\u2029\x85"),
               max_size=40)
SENTENCE = LINE.filter(lambda t: any(c.isalnum() for c in t))
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def expected(lines):
    return [" ".join(t.split()) if ("\n" in t or "\r" in t) else t.strip()
            for t in lines if any(c.isalnum() for c in t)]


@FAST
@given(lines=st.lists(LINE, max_size=12), newline=st.sampled_from(["\n", "\r\n"]),
       encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16"]))
def test_txt_round_trip(tmp_path, lines, newline, encoding):
    path = tmp_path / "r.txt"
    path.write_bytes(newline.join(lines).encode(encoding))
    assert texts(read_file(path)) == expected(lines)


@FAST
@given(values=st.lists(st.text(st.characters(exclude_categories=("Cs", "Cc"), include_characters="\r\n\t"),
                               max_size=40).filter(lambda t: any(c.isalnum() for c in t)), max_size=12))
def test_csv_round_trip(tmp_path, values):
    """Whatever csv.writer writes (quotes, delimiters, line breaks inside values) reads back."""
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(["id", "text"])
    w.writerows([[i, v] for i, v in enumerate(values)])
    path = tmp_path / "r.csv"
    path.write_bytes(buf.getvalue().encode("utf-8"))
    assert texts(read_file(path)) == expected(values)


@FAST
@given(values=st.lists(st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
                       .filter(lambda t: any(c.isalnum() for c in t)), max_size=12),
       bad=st.sets(st.integers(0, 11), max_size=3))
def test_jsonl_round_trip_with_bad_lines_reported(tmp_path, values, bad):
    out, broken = [], []
    for i, v in enumerate(values):
        if i in bad:
            out.append("{not json")
            broken.append(len(out))
        out.append(json.dumps({"text": v}, ensure_ascii=False))
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(out), encoding="utf-8", newline="")
    got = list(read_file(path))
    assert texts(got) == expected(values)
    assert rows(got, BadLine) == broken


@FAST
@given(lines=st.lists(LINE, max_size=12))
def test_paste_reads_like_a_txt_file(tmp_path, lines):
    text = "\n".join(lines)
    (tmp_path / "p.txt").write_text(text, encoding="utf-8")
    assert texts(read_text(text)) == texts(read_file(tmp_path / "p.txt")) == expected(lines)


def test_no_qt_torch_or_index_imports():
    src = (ROOT / "core" / "readers.py").read_text(encoding="utf-8")
    for name in ("torch", "PySide6", "index", "app"):
        assert f"import {name}" not in src and f"from {name}" not in src
