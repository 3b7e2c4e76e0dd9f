"""The one corpus reader: sentences from .txt, .csv/.tsv, .jsonl files and pasted text.

Ingest (index/), the app's import and paste (app/), `embed --file` and training (core/) all read
through here, with one set of rules:

- encoding: a byte-order mark decides (UTF-8, UTF-16, UTF-32); else the ``encoding`` given; else
  UTF-8, where a line that is not valid UTF-8 becomes a ``BadLine`` (``undecodable``) naming the
  byte and column, and the rest of the file is still read;
- a file that looks binary (NUL bytes or mostly control characters in its first 8 KiB) is
  refused with ``BinaryFile`` before anything is read from it; a NUL byte further on refuses
  it too, when the reader meets it (one rule: text holds no NUL);
- lines end at LF, CRLF or CR (CSV: quoted fields may hold line breaks; they become spaces);
- text is trimmed; a blank line is a ``Blank``; a line without any letter or digit (``---``,
  control-character debris) is a ``NoLetters``, counted by callers and never a sentence;
- CSV: the ``column`` named, else the first of ``TEXT_FIELDS`` in the header, else the only
  column (``guess_columns``: every column whose values look like prose, for pairs files); a row
  without that column is a ``BadLine``; the delimiter is a tab for .tsv, else whichever of
  ``, ; tab`` the header line holds most (comma when none);
- JSONL: one object per line, its ``field`` (else the first of ``TEXT_FIELDS`` it has), or a
  JSON string; broken JSON and a missing field are ``BadLine``s with their line number.

Rows are 1-based line numbers in the file (CSV: the line a record starts on, header = line 1).
Encodings, the binary check and a file's numbered lines: core/files/text_file.py.
"""
from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from core.errors import InputError
from core.files.text_file import nul_refusal, numbered_lines, open_checked

TEXT_SUFFIXES = (".txt", ".text", ".md", "")       # one sentence per line
TABLE_SUFFIXES = (".csv", ".tsv")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
TEXT_FIELDS = ("text", "sentence", "sentences", "content", "body")
MAX_LINE_CHARS = 1_000_000       # the encoders refuse longer texts (core/encoder/backends/base.py MAX_TEXT_CHARS)
PEEK_LINES = 50                  # JSONL lines list_fields looks at
GUESS_ROWS = 200                 # CSV rows guess_columns looks at
_ESCAPED = re.compile("[\udc80-\udcff]")    # bytes that did not decode (surrogateescape)
_SURROGATE = re.compile("[\ud800-\udfff]")  # half a UTF-16 pair: JSON "\\ud800" decodes to it
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")    # \w without the underscore (a regex: fast per line)


@dataclass(frozen=True)
class Sentence:
    text: str          # trimmed, inner line breaks turned into spaces
    source: str        # the file (or "clipboard")
    row: int           # 1-based line number

    @property
    def metadata(self) -> dict:
        return {"source": self.source, "row": self.row}


@dataclass(frozen=True)
class BadLine:
    source: str
    row: int
    reason: str                 # for people: "not valid JSON (...)", "not valid UTF-8 (...)"
    undecodable: bool = False   # True: the bytes are not in the file's encoding (try another)

    def __str__(self):
        return f"{self.source}:{self.row}: {self.reason}"


@dataclass(frozen=True)
class Blank:
    source: str
    row: int


@dataclass(frozen=True)
class NoLetters:
    """A line with text but no letter or digit: punctuation, symbols, binary debris."""
    source: str
    row: int


@dataclass
class Collected:
    """Every record of one read, sorted by kind (see ``collect``)."""
    sentences: list          # Sentence
    bad: list                # BadLine
    blank: int = 0           # blank lines
    no_letters: int = 0      # lines without any letter or digit

    @property
    def undecodable(self) -> list:
        return [b for b in self.bad if b.undecodable]


def collect(records) -> Collected:
    out = Collected([], [])
    for rec in records:
        if isinstance(rec, Sentence):
            out.sentences.append(rec)
        elif isinstance(rec, BadLine):
            out.bad.append(rec)
        elif isinstance(rec, NoLetters):
            out.no_letters += 1
        else:
            out.blank += 1
    return out


def _surrogate_reason(text: str) -> str:
    m = _SURROGATE.search(text)
    return (f"holds a lone surrogate \\u{ord(m.group()):04x} (character {m.start() + 1} of its text), "
            "which is not a character")


def _escaped_reason(text: str, encoding: str) -> str:
    m = _ESCAPED.search(text)
    label = "UTF-8" if encoding.startswith("utf-8") else encoding
    return f"not valid {label} (byte {ord(m.group()) - 0xDC00:#04x} at column {m.start() + 1})"


def _record(text: str, source: str, row: int, encoding: str, clean=str.strip):
    if not text.isascii() and _ESCAPED.search(text):
        return BadLine(source, row, _escaped_reason(text, encoding), undecodable=True)
    text = clean(text)
    if not text:
        return Blank(source, row)
    if len(text) > MAX_LINE_CHARS:
        return BadLine(source, row, f"{len(text):,} characters long, more than the "
                                    f"{MAX_LINE_CHARS:,} a sentence may have (split it)")
    if not _LETTER_OR_DIGIT.search(text):
        return NoLetters(source, row)
    return Sentence(text, source, row)


def _join_lines(text: str) -> str:
    """Trimmed; a value spanning several lines (quoted CSV, JSON "\\n") becomes one line."""
    return " ".join(text.split()) if ("\n" in text or "\r" in text) else text.strip()


# ---- the formats --------------------------------------------------------------------------------
def read_text(text: str, source: str = "clipboard"):
    """Pasted text: one sentence per line, the same rules as a .txt file."""
    for n, line in enumerate(io.StringIO(text, newline=None), 1):
        if "\x00" in line:      # not a file to refuse: only this line is not text
            yield BadLine(source, n, "holds a NUL byte")
            continue
        yield _record(line, source, n, "utf-8")


def read_txt(path, encoding: str | None = None):
    """One sentence per line, whatever the file's suffix (``embed --file``)."""
    path, enc = open_checked(path, encoding)
    return _txt(path, enc)


def _txt(path: Path, enc: str):
    src = str(path)
    with open(path, encoding=enc, errors="surrogateescape", newline=None) as f:
        for n, line in numbered_lines(f, src, enc):
            yield _record(line, src, n, enc)


def _delimiter(path: Path, header_line: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    counts = Counter(c for c in header_line if c in ",;\t")
    return max(",;\t", key=lambda c: counts[c]) if counts else ","


def _pick_column(src: str, names: list[str], column: str | None, guess: bool, sample) -> list[int]:
    if column is not None:
        if column not in names:
            raise InputError(f"{src} has no column '{column}' (it has: {', '.join(names)})")
        return [names.index(column)]
    lower = [n.lower() for n in names]
    for name in TEXT_FIELDS:
        if name in lower:
            return [lower.index(name)]
    if len(names) == 1:
        return [0]
    if guess:
        texty = [i for i in range(len(names)) if _looks_like_prose([r[i] if i < len(r) else "" for r in sample])]
        if texty:
            return texty
        raise InputError(f"{src}: no text column found (name one 'text'); columns: {', '.join(names)}")
    raise InputError(f"{src} has columns {', '.join(names)}: choose the one that holds the text",
                     fix={"kind": "column", "columns": list(names)})


def _looks_like_prose(values: list[str]) -> bool:
    """Three words or more on average, and mostly not numbers (training's pairs files)."""
    if not values:
        return False
    words = sum(len(v.split()) for v in values) / len(values)
    numeric = sum(1 for v in values if re.fullmatch(r"[-+0-9.eE]*", v.strip()))
    return words >= 3 and numeric < len(values) / 2


def read_csv(path, column: str | None = None, encoding: str | None = None, guess_columns: bool = False):
    path, enc = open_checked(path, encoding)
    return _csv(path, column, enc, guess_columns)


def _csv(path: Path, column, enc: str, guess: bool):
    src = str(path)
    with open(path, encoding=enc, errors="surrogateescape", newline="") as f:
        reader, names = _csv_header(f, path, enc)
        if names is None:
            return
        rows = _csv_rows(reader, src, enc)
        sample = []
        if guess and column is None:
            for item in rows:
                sample.append(item)
                if len(sample) >= GUESS_ROWS:
                    break
        cols = _pick_column(src, names, column, guess, [r for _, r in sample if isinstance(r, list)])
        for start, row in _chain(sample, rows):
            if isinstance(row, BadLine):
                yield row
            elif not row or all(not c.strip() for c in row):
                yield Blank(src, start)
            else:
                for c in cols:
                    if c >= len(row):
                        yield BadLine(src, start, f"row has no '{names[c]}' value")
                    else:
                        yield _record(row[c], src, start, enc, clean=_join_lines)


def _csv_rows(reader, src: str, enc: str):
    """(first line of the record, fields or a BadLine) after the header."""
    line = reader.line_num
    while True:
        start = line + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            row = BadLine(src, start, f"broken CSV row ({e})")
        except UnicodeDecodeError as e:
            raise InputError(f"{src}, line {start}: cannot be read as {enc} ({e.reason})") from None
        line = reader.line_num
        if isinstance(row, list) and any("\x00" in c for c in row):
            raise nul_refusal(src, start)
        yield start, row


def _chain(first, rest):
    yield from first
    yield from rest


def read_table(path, encoding: str | None = None):
    """(column names, rows) of a .csv/.tsv file read by the same rules as read_csv: rows are
    (line number, list of fields or a BadLine) after the header, read as they are iterated.
    For files whose rows hold several values (evaluation pairs and queries)."""
    path, enc = open_checked(path, encoding)
    src = str(path)
    f = open(path, encoding=enc, errors="surrogateescape", newline="")
    try:
        reader, names = _csv_header(f, path, enc)
    except InputError:
        f.close()
        raise
    if names is None:
        f.close()
        raise InputError(f"{src} is empty")

    def rows():
        with f:
            yield from _csv_rows(reader, src, enc)
    return names, rows()


def _csv_header(f, path: Path, enc: str):
    """(csv reader, the header's column names) of an open .csv/.tsv file; names None when the
    file is empty."""
    src = str(path)
    # A long quoted field is legal CSV; the csv module's 128 KiB default would call it broken.
    csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_CHARS * 4))
    first = f.readline()
    f.seek(0)
    reader = csv.reader(f, delimiter=_delimiter(path, first))
    try:
        header = next(reader)
    except StopIteration:
        return reader, None
    except csv.Error as e:
        raise InputError(f"{src}: not a readable CSV file ({e})") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{src}, line 1: cannot be read as {enc} ({e.reason})") from None
    return reader, [h.strip() for h in header]


def read_jsonl(path, field: str | None = None, encoding: str | None = None):
    path, enc = open_checked(path, encoding)
    return _jsonl(path, field, enc)


def _jsonl(path: Path, field: str | None, enc: str):
    src = str(path)
    with open(path, encoding=enc, errors="surrogateescape", newline=None) as f:
        for n, line in numbered_lines(f, src, enc):
            if _ESCAPED.search(line):
                yield BadLine(src, n, _escaped_reason(line, enc), undecodable=True)
                continue
            if not line.strip():
                yield Blank(src, n)
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield BadLine(src, n, f"not valid JSON ({e.msg})")
                continue
            except RecursionError:   # the json module recurses once per level of nesting
                yield BadLine(src, n, "JSON nested too deeply to read (about 1,000 levels or more)")
                continue
            value = _json_text(obj, field)
            if isinstance(value, BadLine):
                yield BadLine(src, n, value.reason)
            elif _SURROGATE.search(value):
                yield BadLine(src, n, _surrogate_reason(value))
            else:
                yield _record(value, src, n, enc, clean=_join_lines)


def _json_text(obj, field: str | None):
    """The text of one JSONL value, or a BadLine (source/row filled in by the caller)."""
    if isinstance(obj, str) and field is None:
        return obj
    if not isinstance(obj, dict):
        return BadLine("", 0, f"not a JSON object with a '{field or 'text'}' field")
    if field is None:
        field = next((k for k in TEXT_FIELDS if k in obj), None)
        if field is None:
            return BadLine("", 0, f"no 'text' field (it has: {', '.join(map(str, obj)) or 'none'})")
    if field not in obj:
        return BadLine("", 0, f"no '{field}' field")
    if not isinstance(obj[field], str):
        return BadLine("", 0, f"'{field}' is not a string")
    return obj[field]


def read_file(path, column: str | None = None, field: str | None = None, encoding: str | None = None,
              guess_columns: bool = False):
    """The records of a .txt/.csv/.tsv/.jsonl file, by its suffix. Raises InputError at once for
    a missing, binary or unsupported file; ``column``/``field`` choose the CSV column / JSONL
    field (see the module's rules)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TEXT_SUFFIXES + TABLE_SUFFIXES + JSONL_SUFFIXES:
        if not path.exists():
            raise InputError(f"{path}: no such file")
        raise InputError(f"{path}: unsupported file type '{suffix}' (use .txt, .csv or .jsonl)")
    if suffix in TABLE_SUFFIXES:
        return read_csv(path, column, encoding, guess_columns)
    if suffix in JSONL_SUFFIXES:
        return read_jsonl(path, field, encoding)
    return read_txt(path, encoding)


def list_fields(path, encoding: str | None = None) -> list[str]:
    """Columns of a CSV header, or string fields seen in the first lines of a JSONL file
    (empty for plain text)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES + JSONL_SUFFIXES:
        if suffix not in TEXT_SUFFIXES:
            raise InputError(f"{path.name}: unsupported file type '{suffix}' (use .txt, .csv or .jsonl)")
        return []
    path, enc = open_checked(path, encoding)
    try:
        with open(path, encoding=enc, errors="replace", newline="") as f:
            if suffix in TABLE_SUFFIXES:
                first = f.readline()
                f.seek(0)
                try:
                    header = next(csv.reader(f, delimiter=_delimiter(path, first)))
                except StopIteration:
                    raise InputError(f"{path.name} is empty") from None
                except csv.Error as e:
                    raise InputError(f"{path.name}: not a readable CSV file ({e})") from None
                return [h.strip() for h in header if h.strip()]
            names: list[str] = []
            for n, line in enumerate(f):
                if n >= PEEK_LINES:
                    break
                try:
                    obj = json.loads(line)
                except (json.JSONDecodeError, RecursionError):
                    continue
                if isinstance(obj, dict):
                    names += [k for k, v in obj.items() if isinstance(v, str) and k not in names]
    except OSError as e:
        raise InputError(f"cannot open {path}: {e.strerror or e}") from None
    if not names:
        raise InputError(f"{path.name}: no JSON objects with text fields in its first {PEEK_LINES} lines")
    return names
