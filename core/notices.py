"""What a long operation says while it waits on something outside it (another writer's lock),
to whoever runs it: the command line prints each notice as a line on stderr, the app shows it
as the job's progress text. Listening is per thread (a context variable), so two jobs of the
app each hear their own operation's notices; with nobody listening a notice goes to the log.

    with listening(lambda line: print(line, file=sys.stderr)):
        store.add_texts(...)              # may say("waiting for the writer lock ...")
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator

_listener: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "encoderscope_notice_listener", default=None)


@contextlib.contextmanager
def listening(listener: Callable[[str], None]) -> Iterator[None]:
    """Send the notices said on this thread inside the block to `listener` (one line each)."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def say(message: str, log: logging.Logger) -> None:
    """Tell the listener of this thread, or else `log` (as a warning), one line."""
    listener = _listener.get()
    if listener is None:
        log.warning("%s", message)
        return
    try:
        listener(message)
    except Exception:   # noqa: BLE001  (a notice must never break the operation it reports on)
        log.warning("%s", message)
