"""Where the guest build's progress goes.

Every module of :mod:`harness.guest` logs through its own ``logging`` logger (progress at
INFO, warnings at WARNING); the CLI configures where that goes
(:func:`harness.cli.common.configure_logging`). A caller that shows progress its own way (a
sweep's progress bar, a gate's lines, asv's log) passes a :data:`Log` callback to the public
entry points instead (``build_guest(log=...)``): within :func:`reported_to`, the records of
``harness.guest`` go to that callback, once, and not on to the handlers above it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Log = Callable[[str], None]

#: the logger every module of the package logs under (``harness.guest.build`` ...)
PACKAGE_LOGGER = "harness.guest"


class _ToCallback(logging.Handler):
    """Hands each record of the thread that made it to ``log``, as its message alone."""

    def __init__(self, log: Log) -> None:
        super().__init__(logging.INFO)
        self.log = log
        self.thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread:
            return
        try:
            self.log(record.getMessage())
        except Exception:  # noqa: BLE001 - logging's own rule: a failing handler reports, never raises
            self.handleError(record)


@contextmanager
def reported_to(log: Log | None) -> Iterator[None]:
    """Within it, what :mod:`harness.guest` logs at INFO and above in this thread goes to
    ``log`` instead of logging's handlers (the build runs in one thread; another thread's records
    of the package are held back meanwhile); with ``log`` None, nothing changes."""
    if log is None:
        yield
        return
    top = logging.getLogger(PACKAGE_LOGGER)
    handler = _ToCallback(log)
    saved = top.level, top.propagate
    top.addHandler(handler)
    top.setLevel(logging.INFO)
    top.propagate = False
    try:
        yield
    finally:
        top.removeHandler(handler)
        top.setLevel(saved[0])
        top.propagate = saved[1]
