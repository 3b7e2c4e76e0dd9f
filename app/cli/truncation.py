"""The note that a text is longer than the model reads, said once per command (not once per run
of the text), and a word past the cut named as such in its error."""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def truncation_said_once(backend, texts: dict):
    """A note on stderr for each of `texts` ({name: text}) longer than the model reads, said
    once here: the command runs the text several times (before, after, patched), and the
    model's own warning would come with every run."""
    import logging
    import sys

    from core.errors import InputError
    texts = {name: text for name, text in texts.items() if text is not None}
    _, cut = backend.encode_ids(list(texts.values()))
    names = [list(texts)[i] for i in cut]
    for name in names:
        print(f"note: {name} is longer than the {backend.max_length} tokens {backend.model_name} reads: "
              f"only its first {backend.max_length} tokens were used", file=sys.stderr)
    log = logging.getLogger("core.encoder.backends.base")
    said = _DropTruncationWarnings()
    log.addFilter(said)
    try:
        yield
    except InputError as e:
        if names and "occurs 0 times" in str(e):
            # a word past the cut is not among the tokens the model reads: say so with the error
            raise InputError(f"{e} ({' and '.join(names)} {'is' if len(names) == 1 else 'are'} cut to the first "
                             f"{backend.max_length} tokens the model reads: a word past them is not there)",
                             fix=e.fix) from e
        raise
    finally:
        log.removeFilter(said)


class _DropTruncationWarnings:
    def filter(self, record) -> bool:
        return not str(record.msg).startswith("%d of %d texts were longer than")
