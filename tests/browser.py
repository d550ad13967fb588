"""A real headless Chromium (Debian's package, installed by the tier on first use like PostgreSQL), driven over
the Chrome DevTools Protocol on a pipe (`--remote-debugging-pipe`: JSON messages separated by NUL on fds 3 and 4),
so the tests need no websocket client and no browser download.

The browser resolves no host name but 127.0.0.1: a page that needed the network would show it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import peer_venv

TIER = "browser site tests"


def find() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def ensure() -> None:
    """Debian's Chromium where the machine has none (skips only when the package index is unreachable)."""
    peer_venv.debian_package(TIER, "chromium", lambda: find() is not None)


class Browser:
    def __init__(self, width: int = 1280, height: int = 860) -> None:
        self.profile = tempfile.mkdtemp(prefix="eagle3-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        for fd in (to_browser_r, from_browser_w):  # dup2 onto the same number keeps close-on-exec: clear it here
            os.set_inheritable(fd, True)

        def fds() -> None:  # the browser reads commands on fd 3 and answers on fd 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [find() or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "--no-first-run", "--hide-scrollbars", "--mute-audio",
             "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next = 0
        self._buffer = b""
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for method in ("Page.enable", "Runtime.enable", "Network.enable"):
            self.call(method, session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("the browser did not answer")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, timeout: float = 30, **params: Any) -> dict[str, Any]:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
            self.events.append(answer)

    def wait_for(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def open(self, url: str) -> None:
        """Load `url` and wait for its load event and for every chart on it to be drawn (or to fail)."""
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")
        deadline = time.monotonic() + 30
        while self.eval("document.querySelectorAll('figure.chart:not([data-drawn]):not([data-error])').length"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the charts of {url} were not drawn")
            time.sleep(0.1)

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def visible(self, selector: str) -> int:
        """How many elements match `selector` and are rendered with a size (not hidden, not display:none)."""
        return self.eval(f"""Array.from(document.querySelectorAll({json.dumps(selector)})).filter(e => {{
            const r = e.getBoundingClientRect(), s = getComputedStyle(e);
            return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none' &&
                   !e.closest('[hidden]'); }}).length""")

    def requested(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: Path) -> bytes:
        data = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One headless Chromium per test module, installed on first use (ensure)."""
    ensure()
    b = Browser()
    yield b
    b.close()
