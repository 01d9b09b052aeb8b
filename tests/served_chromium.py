"""A directory served on 127.0.0.1 and a headless Chromium to open it: what the page tests share.

Tests import it as ``served_chromium`` (pytest puts ``tests/`` on the path through
``tests/conftest.py``); Debian's chromium and chromium-driver are installed by scripts/setup.sh.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def served(directory: Path, *, window: str | None = None) -> Iterator[tuple[Any, str]]:
    """``(driver, base URL ending in /)`` of ``directory`` served on loopback; both ended after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    options = Options()
    options.binary_location = str(CHROMIUM)
    args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    for arg in [*args, *([f"--window-size={window}"] if window else [])]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        try:
            yield driver, f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            driver.quit()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
