"""Read sentences from .txt (one per line), .csv (a named column) and .jsonl (a named field).

`read_file` yields `Sentence(text, source, row)` for every usable line and `BadLine(source,
row, reason)` for lines it cannot use (undecodable bytes, broken JSON, missing field) instead of
stopping; blank lines yield `Blank(source, row)`. Rows are 1-based line numbers (CSV: the data
row's line number in the file, header = line 1).
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from core.errors import InputError

SUFFIXES = (".txt", ".csv", ".jsonl")


@dataclass(frozen=True)
class Sentence:
    text: str
    source: str
    row: int

    @property
    def metadata(self) -> dict:
        return {"source": self.source, "row": self.row}


@dataclass(frozen=True)
class BadLine:
    source: str
    row: int
    reason: str

    def __str__(self):
        return f"{self.source}:{self.row}: {self.reason}"


@dataclass(frozen=True)
class Blank:
    source: str
    row: int


def _has_bad_bytes(s: str) -> bool:
    try:
        s.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def _clean(text: str) -> str:
    return " ".join(text.split()) if ("\n" in text or "\r" in text) else text.strip()


def _utf8_lines(path: Path):
    """(line number, decoded line) of a file, or a BadLine for a line that is not UTF-8 (a
    leading byte-order mark is dropped)."""
    src = str(path)
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                line = BadLine(src, n, f"not valid UTF-8 (byte {e.start + 1})")
            yield n, line


def read_txt(path: Path):
    src = str(path)
    for n, line in _utf8_lines(path):
        if isinstance(line, BadLine):
            yield line
        elif not line.strip():
            yield Blank(src, n)
        else:
            yield Sentence(line.strip(), src, n)


def read_csv(path: Path, column: str | None):
    src = str(path)
    # surrogateescape keeps undecodable bytes visible so the row can be reported, not the file.
    with open(path, "r", encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise InputError(f"{src}: not a readable CSV file ({e})") from None
        names = [h.strip() for h in header]
        if column is None:
            if len(names) == 1:
                col = 0
            elif "text" in names:
                col = names.index("text")
            else:
                raise InputError(f"{src} has columns {', '.join(names)}: choose one with --column NAME")
        else:
            if column not in names:
                raise InputError(f"{src} has no column '{column}' (it has: {', '.join(names)})")
            col = names.index(column)
        line = reader.line_num
        while True:
            start = line + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:
                yield BadLine(src, start, f"broken CSV row ({e})")
                line = reader.line_num
                continue
            line = reader.line_num
            if not row or all(not c.strip() for c in row):
                yield Blank(src, start)
                continue
            if col >= len(row):
                yield BadLine(src, start, f"row has no '{names[col]}' value")
                continue
            text = row[col]
            if _has_bad_bytes(text):
                yield BadLine(src, start, "not valid UTF-8")
                continue
            text = _clean(text)
            if not text:
                yield Blank(src, start)
            else:
                yield Sentence(text, src, start)


def read_jsonl(path: Path, field: str | None):
    src = str(path)
    field = field or "text"
    for n, line in _utf8_lines(path):
        if isinstance(line, BadLine):
            yield line
            continue
        if not line.strip():
            yield Blank(src, n)
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            yield BadLine(src, n, f"not valid JSON ({e.msg})")
            continue
        if not isinstance(obj, dict) or field not in obj:
            yield BadLine(src, n, f"no '{field}' field")
            continue
        value = obj[field]
        if not isinstance(value, str):
            yield BadLine(src, n, f"'{field}' is not a string")
            continue
        text = _clean(value)
        if not text:
            yield Blank(src, n)
        else:
            yield Sentence(text, src, n)


def read_file(path, column: str | None = None, field: str | None = None):
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return read_csv(path, column)
    if suffix == ".jsonl":
        return read_jsonl(path, field)
    if suffix == ".txt" or suffix == "":
        return read_txt(path)
    raise InputError(f"{path}: unsupported file type '{suffix}' (use .txt, .csv or .jsonl)")
