"""A minimal W3C WebDriver client over HTTP (standard library only) for chromedriver.

Just what the report's browser test needs: start chromedriver on a free localhost port,
open a headless Chromium session, navigate, run scripts, read the browser console log and
take a screenshot.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

CHROME_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1280,900",
]


def find_browser() -> tuple[str, str] | None:
    """Paths of chromium and chromedriver, or None when either is missing."""
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chrome, driver) if chrome and driver else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriverError(RuntimeError):
    """chromedriver answered with an error."""


class Browser:
    """A headless Chromium session driven through chromedriver; use as a context manager."""

    def __init__(self, chrome: str, driver: str, *, startup_s: float = 30.0) -> None:
        self.profile = tempfile.mkdtemp(prefix="commopt-chromium-")
        port = _free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([driver, f"--port={port}"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + startup_s
        while True:
            try:
                self._call("GET", "/status")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise WebDriverError("chromedriver did not start") from None
                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chrome,
                                   "args": CHROME_ARGS + [f"--user-data-dir={self.profile}"]},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}}
        try:
            self.session = self._call("POST", "/session", caps)["sessionId"]
        except BaseException:
            self.close()
            raise

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                payload = json.loads(resp.read().decode() or "{}")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise WebDriverError(f"{method} {path}: {exc.code} {detail[:500]}") from None
        return payload.get("value")

    def _s(self, path: str) -> str:
        return f"/session/{self.session}{path}"

    def get(self, url: str) -> None:
        """Navigate to ``url`` and wait for the load event."""
        self._call("POST", self._s("/url"), {"url": url})

    def execute(self, script: str, *args: Any) -> Any:
        """Run ``script`` (a function body) in the page and return its value."""
        return self._call("POST", self._s("/execute/sync"), {"script": script, "args": list(args)})

    def console_log(self) -> list[dict[str, Any]]:
        """Browser console entries since the last call (chromedriver's log endpoint)."""
        return self._call("POST", self._s("/se/log"), {"type": "browser"}) or []

    def screenshot(self, path: str | Path) -> bytes:
        """Save a PNG screenshot of the viewport to ``path``; returns the bytes."""
        png = base64.b64decode(self._call("GET", self._s("/screenshot")))
        Path(path).write_bytes(png)
        return png

    def close(self) -> None:
        """End the session, stop chromedriver and remove the profile directory."""
        try:
            if getattr(self, "session", None):
                self._call("DELETE", self._s(""))
        except (WebDriverError, urllib.error.URLError, ConnectionError):
            pass
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
