"""One progress line on stderr for work reported as progress(done, total, message) (the corpus
map's stages and UMAP's epochs): redrawn in place on a terminal, a few times a second; one
line per stage where stderr is a file or a pipe, so logs stay short."""
from __future__ import annotations

import sys
import time

REDRAW_SECONDS = 0.1


class ProgressLine:
    def __init__(self, stream=None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.live = not quiet and getattr(self.stream, "isatty", lambda: False)()
        self.drawn = 0            # characters of the line on screen (terminal)
        self.last = 0.0
        self.stage = None

    def update(self, done, total, message) -> None:
        if self.quiet:
            return
        stage = message.split(":")[0]
        if not self.live:
            if stage != self.stage:
                self.stage = stage
                self.stream.write(f"{stage}\n")
                self.stream.flush()
            return
        now = time.monotonic()
        if stage == self.stage and now - self.last < REDRAW_SECONDS and done < total:
            return
        self.stage, self.last = stage, now
        self.stream.write("\r" + message.ljust(self.drawn))
        self.stream.flush()
        self.drawn = len(message)

    def end(self) -> None:
        """End the line drawn in place (before a result, an error or an interruption is said)."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = 0
