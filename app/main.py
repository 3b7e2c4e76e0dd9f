"""`encoderscope`: the command line (app/cli/), whose `gui` subcommand opens the desktop app
(app/gui/). The one module that knows both, so that the command line never imports Qt."""
from __future__ import annotations

import sys


def open_gui(store: str | None) -> int:
    from app.gui.shell.main import main as gui_main
    return gui_main([] if store is None else ["--store", store]) or 0


def main(argv=None) -> int:
    from app.cli import main as cli_main
    return cli_main(argv, open_gui=open_gui)


if __name__ == "__main__":
    sys.exit(main())
