"""Headless Chromium driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``):
a page opened at an exact viewport (``Emulation.setDeviceMetricsOverride``: a window size is not
one, and headless Chromium keeps windows at least 500 px wide), then measured with JavaScript in
the page and photographed. No client library: the protocol is JSON messages ended by a NUL byte,
read from the browser's fd 4 and written to its fd 3.
"""
from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import time
from pathlib import Path

from tests.slowdown import limit

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe"]


class ChromiumError(Exception):
    pass


class Chromium:
    def __init__(self, binary: str, profile: Path, timeout_s: float = 60.0):  # a quiet machine's seconds
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def pipes_at_3_and_4() -> None:  # in the child: the protocol's fixed descriptors
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=pipes_at_3_and_4, pass_fds=(3, 4))  # kept by the close after preexec
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.timeout_s = limit(timeout_s)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        self.session = None
        page = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise ChromiumError("no answer from Chromium in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise ChromiumError(f"Chromium closed its pipe (exit {self.proc.poll()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(line)

    def call(self, method: str, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self.session is not None:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            answer = self._message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise ChromiumError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout_s
        while True:
            found = next((e for e in self._events if e.get("method") == method), None)
            if found is not None:
                self._events.remove(found)
                return found
            self._events.append(self._message(deadline))

    def open(self, url: str, width: int, height: int) -> None:
        """Load ``url`` in a viewport of exactly width × height CSS pixels (a phone's, below 600 px)."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=width < 600)
        self.call("Page.enable")
        self._events.clear()
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression!r}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return path

    def close(self) -> None:
        try:
            self.session = None
            self.call("Browser.close")
        except ChromiumError:
            pass
        finally:
            try:
                self.proc.wait(timeout=limit(30))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            os.close(self._to_browser)
            os.close(self._from_browser)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# The page's own measurements: its scroll width against the viewport, and where the verdict is.
MEASURE = """JSON.stringify((() => {
  const verdict = document.getElementById("verdict");
  const head = verdict && (verdict.querySelector("p") || verdict);
  const box = head ? head.getBoundingClientRect() : null;
  const page = document.documentElement;
  const wide = [...document.body.querySelectorAll("*")].filter(e => !(e.parentElement && e.parentElement.closest(".scroll")))
    .filter(e => e.getBoundingClientRect().right > page.clientWidth + 1).map(e => e.tagName + (e.id ? "#" + e.id : ""));
  const header = document.getElementById("header");
  return {scrollWidth: page.scrollWidth, clientWidth: page.clientWidth, innerWidth, innerHeight,
          verdictTop: box && box.top, verdictBottom: box && box.bottom,
          verdictBeforeHeader: Boolean(verdict && header &&
                                       verdict.compareDocumentPosition(header) & Node.DOCUMENT_POSITION_FOLLOWING),
          overflowing: wide.slice(0, 10)};
})())"""


def measure(page: Path, binary: str, profile: Path, width: int, height: int, shot: Path | None = None) -> dict:
    """Open ``page`` at width × height; the MEASURE figures (and a screenshot when ``shot`` is given)."""
    with Chromium(binary, profile) as browser:
        browser.open(page.as_uri(), width, height)
        figures = json.loads(browser.evaluate(MEASURE))
        if shot is not None:
            browser.screenshot(shot)
    return figures
