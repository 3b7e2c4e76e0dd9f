"""The one door every command's printed result goes through: standard output wrapped so that a
write or flush that fails (a full disk, a lost file system) becomes one `error:` line naming the
file, never a traceback, whichever command printed and however (print, JSON, flush=True)."""
from __future__ import annotations

import errno
import os
import sys
from contextlib import contextmanager


class OutputFailed(Exception):
    """Standard output could not be written; `reason` says why in words, `finished` whether the
    command's work was done when it failed (its result was being printed)."""

    def __init__(self, what: str, where: str, reason: str, finished: bool, done: str | None = None):
        super().__init__(f"{where}: {reason}")
        self.what, self.where, self.reason, self.finished, self.done = what, where, reason, finished, done

    def words(self) -> str:
        if self.done:      # a command whose rerun would not do it again (a removal, a saved run)
            return (f"could not write {self.what} to {self.where}: {self.reason}; the work is done and "
                    f"kept ({self.done}), only its printed result is missing: there is no need to run it "
                    "again; free some space or send the output elsewhere next time")
        after = ("the command's work is done and kept, only its printed result is missing"
                 if self.finished else "the command stopped there")
        return (f"could not write {self.what} to {self.where}: {self.reason}; {after}: free some "
                "space or send the output elsewhere, and run it again")


class GuardedStdout:
    """Standard output that turns an OSError of write or flush into OutputFailed (a broken pipe
    stays itself: the reader went away, `... | head`, which is not an error of ours)."""

    def __init__(self, stream):
        self._stream = stream
        self.what = "the output"
        self.finished = False
        self.done: str | None = None

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise self._failed(e) from None

    def flush(self):
        try:
            return self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise self._failed(e) from None

    def _failed(self, e: OSError) -> OutputFailed:
        where = stream_name(self._stream)
        _drop(self._stream)
        return OutputFailed(self.what, where, os_reason(e), self.finished, self.done)

    def __getattr__(self, name):   # fileno, isatty, encoding...: the real stream's own
        return getattr(self._stream, name)


@contextmanager
def guarded_stdout():
    """sys.stdout guarded for the time of one command, then given back as it was."""
    previous = sys.stdout
    sys.stdout = GuardedStdout(previous)
    try:
        yield
    except BaseException:   # an error line follows: what was printed before it goes out now, or not at all
        try:
            previous.flush()
        except OSError:
            _drop(previous)
        raise
    finally:
        if sys.stdout.__class__ is GuardedStdout:
            sys.stdout = previous


def result_follows(what: str = "the output", done: str | None = None) -> None:
    """What is printed from here on is the command's result, its work done (a JSON line at the
    end): a failure to print it says so. ``done``: what the work was, in words, for a command that
    running again would not repeat (it says that instead of advising a rerun)."""
    if isinstance(sys.stdout, GuardedStdout):
        sys.stdout.what = what
        sys.stdout.finished = True
        if done is not None:
            sys.stdout.done = done


CLOSED_STDOUT = ("standard output is closed (>&-), so nothing was done: to run it without output, send "
                 "the output to the null device instead (> /dev/null, or > NUL on Windows)")


def stdout_closed() -> bool:
    """Standard output is closed (`>&-`): Python then has no sys.stdout at all. Its descriptor is
    taken by the null device at once, so that no file the command opens gets it, and printing to
    it could never land in that file."""
    if sys.stdout is not None:
        return False
    try:
        os.fstat(1)
    except OSError:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != 1:
                os.dup2(null, 1)
                os.close(null)
        except OSError:
            pass
    return True


def stream_name(stream) -> str:
    from core.files.platform_os import path_of_fd
    try:
        return path_of_fd(stream.fileno()) or "standard output"
    except (OSError, ValueError, AttributeError):
        return "standard output"


def os_reason(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return "the disk is full (ENOSPC)"
    if e.errno == getattr(errno, "EDQUOT", None):
        return "the disk quota is used up"
    return f"{e.strerror or e}"


def _drop(stream) -> None:
    """Nothing more goes to the failed output: its descriptor now points at the null device, so
    what is still buffered is thrown away when Python flushes at exit (no second error)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
