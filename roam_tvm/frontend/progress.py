"""Stage messages of a long import, on stderr."""

from __future__ import annotations

import sys
import time


class Progress:
    """Stage messages on stderr, once the import has run for more than ``after`` seconds.

    Small models stay silent; ``quiet=True`` silences the messages, ``quiet=False`` always
    prints them.
    """

    def __init__(self, quiet: bool | None = None, after: float = 3.0):
        self.quiet = quiet
        self.after = 0.0 if quiet is False else after
        self.t0 = time.time()
        self.last = "start"

    def __call__(self, msg: str) -> None:
        el = time.time() - self.t0
        if not self.quiet and el >= self.after:
            print(f"[roam-tvm frontend {el:6.1f}s] (done: {self.last}) {msg}", file=sys.stderr,
                  flush=True)
        self.last = msg
