"""Headless Chromium for the report's browser tests, driven by Selenium through the system's
chromedriver (``make browser-deps`` installs both from the distribution's packages; Selenium
never downloads a driver because it is given the driver's path).

The tests use a small surface: navigate, run a script, read the browser console, take a
screenshot. :class:`Browser` gives exactly that over a Selenium session.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

CHROME_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1280,900",
]


#: How long :meth:`Browser.console_log` waits for the page's console to be delivered.
CONSOLE_TIMEOUT_S = 10.0


def find_browser() -> tuple[str, str] | None:
    """Paths of chromium and chromedriver, or None when either (or Selenium) is missing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chrome, driver) if chrome and driver else None


class Browser:
    """A headless Chromium session (Selenium WebDriver); use as a context manager."""

    def __init__(self, chrome: str, driver: str) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="commopt-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = chrome
        for arg in [*CHROME_ARGS, f"--user-data-dir={self.profile}"]:
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self._flushes = 0
        try:
            self.driver = webdriver.Chrome(service=Service(executable_path=driver), options=options)
        except BaseException:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise

    def get(self, url: str) -> None:
        """Navigate to ``url`` and wait for the load event."""
        self.driver.get(url)

    def execute(self, script: str, *args: Any) -> Any:
        """Run ``script`` (a function body) in the page and return its value."""
        return self.driver.execute_script(script, *args)

    def console_log(self) -> list[dict[str, Any]]:
        """Browser console entries since the last call, every one the page wrote so far.

        chromedriver hands console messages over as they arrive from the page, so an error
        the page threw just now may not be in the log yet (a check read too early misses it).
        The page therefore writes a marker last, and the log is read until the marker is in
        it: in-order delivery means everything written before it has arrived too.
        """
        self._flushes += 1
        marker = f"commopt-console-flush-{self._flushes}"
        self.driver.execute_script("console.info(arguments[0]);", marker)
        entries: list[dict[str, Any]] = []
        deadline = time.monotonic() + CONSOLE_TIMEOUT_S
        while time.monotonic() < deadline:
            for entry in self.driver.get_log("browser"):
                if marker in entry.get("message", ""):
                    return entries
                entries.append(entry)
        raise TimeoutError(f"the browser console did not deliver {marker!r} within "
                           f"{CONSOLE_TIMEOUT_S} s")

    def screenshot(self, path: str | Path) -> bytes:
        """Save a PNG screenshot of the viewport to ``path``; returns the bytes."""
        png = self.driver.get_screenshot_as_png()
        Path(path).write_bytes(png)
        return png

    def close(self) -> None:
        """End the session (stopping chromedriver) and remove the profile directory."""
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
