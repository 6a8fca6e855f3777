"""The real headless browser of the page tests: Debian's chromium, started by Playwright."""

from __future__ import annotations

import shutil
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def launch_chromium(playwright: Any) -> Any:
    """A headless chromium that makes no requests of its own (updates, telemetry)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=_ARGS)
