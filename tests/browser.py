"""Headless Chromium (Debian's `chromium` package) driven over the DevTools protocol: load a page, wait in real
time until its text contains a marker (a Streamlit page renders after its script ran on the server), then read
the page's text and HTML and take a screenshot (`render`); or use a page as a person does, clicking with the mouse
and typing (`chromium`, `Page`). `websockets` comes with streamlit."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from websockets.sync.client import ClientConnection, connect


@dataclass(frozen=True)
class Rendered:
    text: str  # document.body.innerText: what a reader sees
    html: str
    seconds: float  # from navigation until the marker appeared


class ChromiumMissingError(RuntimeError):
    pass


def chromium_binary() -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        raise ChromiumMissingError("chromium is not installed. Fix: make chromium (apt-get install -y chromium)")
    return binary


class _Session:
    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        self._socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=60))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


@contextlib.contextmanager
def chromium(*, width: int = 1400, height: int = 2400) -> Iterator[Page]:
    """A fresh headless Chromium (its own profile) with one page, driven over the DevTools protocol; the whole
    browser (its process group) is stopped on exit."""
    # Chromium's helper processes may still write to the profile as it exits: the profile's removal is best effort
    with tempfile.TemporaryDirectory(prefix="chromium-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--hide-scrollbars", "--no-first-run", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not port_file.exists() or not port_file.read_text().strip():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chromium did not start (exit code {process.poll()})")
                time.sleep(0.2)
            port = int(port_file.read_text().split()[0])
            [page] = [t for t in requests.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
                      if t["type"] == "page"]
            with connect(page["webSocketDebuggerUrl"], max_size=None) as socket:
                yield Page(_Session(socket))
        finally:  # the whole process group: the browser and its helpers (renderer, GPU, crash handler)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)


class Page:
    """One page, used as a person uses it: real mouse clicks at an element's place, real typing."""

    def __init__(self, session: _Session) -> None:
        self.session = session

    def goto(self, url: str) -> None:
        self.session.call("Page.navigate", url=url)

    def text(self) -> str:
        return str(self.session.evaluate("document.body ? document.body.innerText : ''") or "")

    def wait_for(self, *markers: str, timeout: float = 120.0, absent: tuple[str, ...] = ()) -> str:
        """The page's text once it shows every marker and none of `absent` (TimeoutError with the text seen)."""
        started, text = time.monotonic(), ""
        while [m for m in markers if m not in text] or [a for a in absent if a in text]:
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{markers} (without {absent}) not on the page after {timeout:.0f}s; it says: "
                                   f"{text[-3000:]}")
            time.sleep(0.3)
            text = self.text()
        return text

    def click(self, element: str) -> None:
        """Click, with the mouse, the element a JavaScript expression finds (scrolled into view first)."""
        box = self.session.evaluate(
            f"(() => {{ const e = {element}; if (!e) return null; e.scrollIntoView({{block: 'center'}}); "
            "const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        if not box:
            raise LookupError(f"nothing on the page matches {element}")
        x, y = box
        self.session.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.session.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type(self, text: str) -> None:
        """Type into the focused element (as a keyboard's input method would)."""
        self.session.call("Input.insertText", text=text)

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.session.call("Page.captureScreenshot", format="png")["data"]))


def render(url: str, *, markers: tuple[str, ...], screenshot: Path, timeout: float = 120.0, width: int = 1400,
           height: int = 2400) -> Rendered:
    """Load `url`, wait until the page's text contains every marker (TimeoutError with the text seen otherwise).
    Components render lazily: give markers from the last parts of the page."""
    with chromium(width=width, height=height) as page:
        started = time.monotonic()
        page.goto(url)
        try:
            page.wait_for(*markers, timeout=timeout)
        except TimeoutError as exc:
            raise TimeoutError(f"on {url}: {exc}") from exc
        seconds = time.monotonic() - started
        time.sleep(1.0)  # let the chart finish drawing before the screenshot
        text = page.text()
        html = page.session.evaluate("document.documentElement.outerHTML") or ""
        page.screenshot(screenshot)
        return Rendered(text, html, seconds)
