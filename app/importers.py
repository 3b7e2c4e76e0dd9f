"""File import helpers on top of ``index.readers``: which columns/fields a file offers, and its
sentences (bad lines are counted and reported, not fatal unless nothing is usable)."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InputError
from index.readers import SUFFIXES, BadLine, Sentence, read_file

PEEK_LINES = 50
PREVIEW_LINES = 1000     # the column picker's preview reads at most this many lines (UI thread)


@dataclass
class FileSentences:
    path: Path
    texts: list = field(default_factory=list)
    metadata: list = field(default_factory=list)
    bad: list = field(default_factory=list)      # BadLine
    blank: int = 0

    def summary(self) -> str:
        text = f"{len(self.texts):,} sentences from {self.path.name}"
        if self.bad:
            text += f"; skipped {len(self.bad)} unusable line(s), e.g. line {self.bad[0].row}: {self.bad[0].reason}"
        return text


def needs_field(path) -> bool:
    return Path(path).suffix.lower() in (".csv", ".jsonl")


def list_fields(path) -> list[str]:
    """Columns of a CSV header, or string fields seen in the first lines of a JSONL file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES and suffix != "":
        raise InputError(f"{path.name}: unsupported file type '{suffix}' (use .txt, .csv or .jsonl)")
    try:
        if suffix == ".csv":
            with open(path, "r", encoding="utf-8-sig", errors="replace", newline="") as f:
                try:
                    header = next(csv.reader(f))
                except StopIteration:
                    raise InputError(f"{path.name} is empty") from None
                except csv.Error as e:
                    raise InputError(f"{path.name}: not a readable CSV file ({e})") from None
            return [h.strip() for h in header if h.strip()]
        if suffix == ".jsonl":
            names: list[str] = []
            with open(path, "rb") as f:
                for n, raw in enumerate(f):
                    if n >= PEEK_LINES:
                        break
                    try:
                        obj = json.loads(raw.decode("utf-8-sig"))
                    except (UnicodeDecodeError, json.JSONDecodeError):
                        continue
                    if isinstance(obj, dict):
                        names += [k for k, v in obj.items() if isinstance(v, str) and k not in names]
            if not names:
                raise InputError(f"{path.name}: no JSON objects with text fields in its first "
                                 f"{PEEK_LINES} lines")
            return names
    except OSError as e:
        raise InputError(f"cannot open {path}: {e.strerror or e}") from None
    return []


def preview(path, column: str | None, n: int = 5, max_lines: int = PREVIEW_LINES) -> list[str]:
    """The first ``n`` sentences, looking at no more than ``max_lines`` lines: it runs on the UI
    thread, so a huge file whose column is mostly empty must not be read to its end."""
    out = []
    try:
        items = read_file(path, column=column, field=column)
        for seen, item in enumerate(items, 1):
            if isinstance(item, Sentence):
                out.append(item.text)
                if len(out) >= n:
                    break
            if seen >= max_lines:
                break
        items.close()
    except (InputError, OSError) as e:
        return [f"({e})"]
    if not out:
        return [f"(no text in '{column}' in the first {max_lines:,} lines)"]
    return out


def read_sentences(path, column: str | None = None, cancel=None) -> FileSentences:
    path = Path(path)
    result = FileSentences(path)
    try:
        for item in read_file(path, column=column, field=column):
            if isinstance(item, Sentence):
                result.texts.append(item.text)
                result.metadata.append(item.metadata)
            elif isinstance(item, BadLine):
                result.bad.append(item)
            else:
                result.blank += 1
            if cancel is not None and len(result.texts) % 10000 == 0 and cancel.is_set():
                break
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    if not result.texts:
        if result.bad:
            raise InputError(f"{path.name} holds no usable sentences: {len(result.bad)} bad line(s), "
                             f"the first at line {result.bad[0].row}: {result.bad[0].reason}")
        raise InputError(f"{path.name} holds no sentences")
    return result
