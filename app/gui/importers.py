"""The app's file import on top of ``core.readers`` (the one reader): a file's sentences with
what was skipped, and the column picker's preview. Qt-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InputError
from core.files.text_file import COMMON_ENCODINGS
from core.readers import JSONL_SUFFIXES, TABLE_SUFFIXES, Sentence, collect, list_fields, read_file

__all__ = ["COMMON_ENCODINGS", "FileSentences", "NotInEncoding", "list_fields", "needs_field", "preview",
           "read_sentences"]

PREVIEW_LINES = 1000     # the column picker's preview reads at most this many lines (UI thread)


class NotInEncoding(InputError):
    """Lines of the file are not in the encoding it was read with: ask the user for another."""

    def __init__(self, message: str, path: Path, encoding: str | None):
        super().__init__(message)
        self.path = path            # the file
        self.encoding = encoding    # what it was read with (None: UTF-8)


@dataclass
class FileSentences:
    path: Path
    texts: list = field(default_factory=list)
    metadata: list = field(default_factory=list)
    bad: list = field(default_factory=list)      # BadLine
    blank: int = 0
    no_letters: int = 0                          # lines without any letter or digit

    def summary(self) -> str:
        text = f"{len(self.texts):,} sentences from {self.path.name}"
        if self.bad:
            text += f"; skipped {len(self.bad)} unusable line(s), e.g. line {self.bad[0].row}: {self.bad[0].reason}"
        if self.no_letters:
            text += f"; skipped {self.no_letters} line(s) without any letter or digit"
        return text


def needs_field(path) -> bool:
    return Path(path).suffix.lower() in TABLE_SUFFIXES + JSONL_SUFFIXES


def preview(path, column: str | None, n: int = 5, max_lines: int = PREVIEW_LINES,
            encoding: str | None = None) -> list[str]:
    """The first ``n`` sentences, looking at no more than ``max_lines`` lines: it runs on the UI
    thread, so a huge file whose column is mostly empty must not be read to its end."""
    out = []
    try:
        items = read_file(path, column=column, field=column, encoding=encoding)
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


def read_sentences(path, column: str | None = None, cancel=None, encoding: str | None = None,
                   strict_encoding: bool = False) -> FileSentences:
    """Every sentence of a file. ``strict_encoding``: a line not in the encoding raises
    NotInEncoding (the app then offers another encoding) instead of being skipped."""
    path = Path(path)
    try:
        got = collect(_until_cancelled(read_file(path, column=column, field=column, encoding=encoding), cancel))
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    if strict_encoding and got.undecodable:
        first = got.undecodable[0]
        raise NotInEncoding(f"{path.name} is not {encoding or 'UTF-8'} text: {len(got.undecodable):,} "
                            f"line(s) cannot be read, the first is line {first.row} ({first.reason})",
                            path, encoding)
    result = FileSentences(path, [s.text for s in got.sentences], [s.metadata for s in got.sentences],
                           got.bad, got.blank, got.no_letters)
    if not result.texts:
        if result.bad:
            raise InputError(f"{path.name} holds no usable sentences: {len(result.bad)} bad line(s), "
                             f"the first at line {result.bad[0].row}: {result.bad[0].reason}")
        raise InputError(f"{path.name} holds no sentences")
    return result


def _until_cancelled(records, cancel, every: int = 10000):
    for n, rec in enumerate(records, 1):
        yield rec
        if cancel is not None and n % every == 0 and cancel.is_set():
            return
