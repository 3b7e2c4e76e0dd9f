"""`encoderscope` on the command line: the parser and the one place errors become `error:` lines.

One module per group of subcommands, each with `register(subparsers)`: model.py (embed, inspect,
fill-mask, models), store.py (ingest, search, info, remove), migrate.py, train.py, runs.py (list,
compare), experiment.py, eval.py, explain.py, why.py, intervene.py (ablate, patch, importance), causal.py
(attribute; patch --sweep/--trace, ablate --cut), map.py, features.py (features train|quality|show|ablate|steer|sweep);
options.py holds what they share. Nothing here imports Qt: `gui` runs the desktop app through the
`open_gui` function the launcher (app/main.py) passes in.
Errors meant for people print as `error: ...` with exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

from app.cli import causal, experiment, explain, features, intervene, migrate, model, runs, store, train, why
from app.cli import eval as eval_command  # not `eval`: the builtin stays itself here
from app.cli import map as map_command  # not `map`: the builtin stays itself here
from app.cli.output import OutputFailed, guarded_stdout, result_follows
from app.cli.remedies import worded
from core.errors import EncoderscopeError, InputError, Terminated
from core.notices import listening

EXIT_USAGE = 2
# in the order `--help` lists them
COMMANDS = (model, store, migrate, train, runs, experiment, eval_command, explain, why, intervene, causal, map_command,
            features)


def build_parser(open_gui: Callable[[str | None], int] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="encoderscope",
                                     description="Embed, search, inspect and fill masks with transformer encoders.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    p = sub.add_parser("gui", help="open the desktop app")
    p.add_argument("--store", metavar="STORE",
                   help="store to open: a folder, milvus-lite:FOLDER or http(s)://HOST:PORT")
    p.set_defaults(func=lambda args: _gui(args, open_gui))
    return parser


def _gui(args, open_gui) -> int:
    if open_gui is None:
        raise InputError("this entry point is the command line alone: open the app with `encoderscope gui`")
    return open_gui(args.store) or 0


def check_arguments(args) -> None:
    """Arguments are text: bytes that are not UTF-8 (Python keeps them as lone surrogates)
    are refused here, before a tokenizer or a database meets them."""
    for name, value in vars(args).items():
        for text in (value if isinstance(value, list) else [value]):
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as e:
                    bad = os.fsencode(text[e.start:e.end])
                    raise EncoderscopeError(
                        f"the {name.replace('_', ' ')} argument is not valid UTF-8 text (byte "
                        f"{bad[0]:#04x} at character {e.start + 1}); pass it in UTF-8") from None


def _note(line: str) -> None:
    """A notice of a command that waits (another writer's lock): one line on stderr, above a
    progress bar rather than through it."""
    from tqdm import tqdm
    tqdm.write(f"note: {line}", file=sys.stderr)


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv=None, open_gui: Callable[[str | None], int] | None = None) -> int:
    """Run one command; SIGTERM ends it as Ctrl-C does (each command keeps or saves its work)."""
    from core.files.platform_os import stop_signals
    if threading.current_thread() is not threading.main_thread() or len(stop_signals()) < 2:
        return _main(argv, open_gui)     # Windows sends no SIGTERM: Ctrl-C is the only stop
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(argv, open_gui)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv, open_gui) -> int:
    parser = build_parser(open_gui)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        check_arguments(args)
        with listening(_note), guarded_stdout():
            code = args.func(args) or 0
            result_follows()
            sys.stdout.flush()   # here, so that a full disk is an error line, not a failure at exit
            return code
    except OutputFailed as e:
        print(f"error: {e.words()}", file=sys.stderr)
        return EXIT_USAGE
    except EncoderscopeError as e:
        print(f"error: {worded(e, args)}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated:
        print("terminated (SIGTERM)", file=sys.stderr)
        return 128 + 15     # SIGTERM's number (a name some platforms lack)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`encoderscope search ... | head`): not an error of ours
        try:   # as the Python docs advise: no second error when stdout is flushed at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0

