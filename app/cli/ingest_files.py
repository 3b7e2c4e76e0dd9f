"""The FILEs of `encoderscope ingest`: read once to count and check (a binary, missing or
unreadable file stops the ingest before anything is embedded), then again as they are embedded,
so memory stays bounded by the ingest's window; what was skipped, said on stderr."""
from __future__ import annotations

import sys

from core.errors import InputError

MAX_BAD_LINES_SHOWN = 20


def _err(msg):
    print(msg, file=sys.stderr)


class _Inputs:
    """The (text, metadata) items of every FILE, read again as they are embedded: memory stays
    bounded by the ingest's window, not by the corpus. `len()` is the number of sentences found
    by the first pass (scan_inputs), which a file changed in between may make wrong for the
    progress bar only."""

    def __init__(self, args, count: int):
        self.args, self.count = args, count

    def __len__(self):
        return self.count

    def __iter__(self):
        from core.readers import Sentence, read_file
        a = self.args
        for f in a.files:
            for rec in read_file(f, column=a.column, field=a.field, encoding=a.encoding):
                if isinstance(rec, Sentence):
                    yield rec.text, rec.metadata


def read_inputs(args):
    """(items, Collected of everything but the sentences) from every FILE: a first pass counts
    and checks, so a binary, missing or unreadable file stops the ingest before anything is
    embedded; the items are read again as they are embedded."""
    from core.readers import BadLine, Blank, Collected, NoLetters, read_file
    count, rest = 0, Collected([], [])
    for f in args.files:
        for rec in read_file(f, column=args.column, field=args.field, encoding=args.encoding):
            if isinstance(rec, BadLine):
                rest.bad.append(rec)
            elif isinstance(rec, NoLetters):
                rest.no_letters += 1
            elif isinstance(rec, Blank):
                rest.blank += 1
            else:
                count += 1
    return _Inputs(args, count), rest


def report_inputs(args, items, rest) -> None:
    """Say what was skipped (lines, encodings, symbol-only lines); an error when no file gave a
    single sentence."""
    from app.cli.remedies import encoding_hint
    bad, undecodable = rest.bad, rest.undecodable
    hint = f"; {encoding_hint()}" if undecodable and args.encoding is None else ""
    if not len(items) and args.files:
        names = ", ".join(args.files)
        if undecodable:
            first = undecodable[0]
            raise InputError(f"nothing to ingest: no line of {names} could be read as "
                             f"{args.encoding or 'UTF-8'} (line {first.row}: {first.reason}){hint}")
        why = [f"{len(bad)} unreadable, the first {bad[0]}"] if bad else []
        why += [f"{rest.no_letters} without any letter or digit"] if rest.no_letters else []
        raise InputError(f"nothing to ingest: {names} has no text lines"
                         + (f" ({'; '.join(why)})" if why else ""))
    for b in bad[:MAX_BAD_LINES_SHOWN]:
        _err(f"skipped {b}")
    if len(bad) > MAX_BAD_LINES_SHOWN:
        _err(f"... and {len(bad) - MAX_BAD_LINES_SHOWN} more unreadable lines")
    if rest.no_letters:
        _err(f"note: skipped {rest.no_letters} line(s) without any letter or digit")
    if undecodable:
        _err(f"note: {len(undecodable)} line(s) could not be read as {args.encoding or 'UTF-8'} "
             f"and were skipped{hint}")
