"""Drive Debian's headless Chromium through the DevTools protocol over a pipe (no extra package).

``--remote-debugging-pipe`` makes Chromium read protocol commands from file descriptor 3
and write replies and events to descriptor 4, each message JSON ended by a NUL byte. No
port is opened, so tests running at once cannot collide. One :class:`Browser` serves many
pages; :meth:`Browser.open` loads a file and returns a :class:`Page` with the console
errors, uncaught exceptions, dialogs and network requests seen while it loaded.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
MISSING = (f"{CHROMIUM} is missing: the HTML report tests need Debian's Chromium "
           "(apt-get install chromium; `make test` installs it)")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe")


class BrowserError(RuntimeError):
    pass


@dataclass
class Page:
    """What one page load produced."""

    url: str
    session: str
    browser: Browser
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable values only)."""
        reply = self.browser.call("Runtime.evaluate", {"expression": expression,
                                                       "returnByValue": True}, self.session)
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression!r} raised {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, path: Path, width: int = 1366) -> Path:
        """A PNG of the whole page at a laptop's width."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.browser.call("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": min(height, 16000), "deviceScaleFactor": 1,
                           "mobile": False}, self.session)
        reply = self.browser.call("Page.captureScreenshot",
                                  {"format": "png", "captureBeyondViewport": True}, self.session)
        import base64

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(reply["data"]))
        return path

    def errors(self) -> list[str]:
        return self.console_errors + self.exceptions


class Browser:
    """A headless Chromium process driven over the DevTools pipe."""

    def __init__(self, executable: str = CHROMIUM, timeout: float = 60.0):
        if not os.path.exists(executable):
            raise BrowserError(MISSING)
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="accelml-chromium-")
        to_browser_read, to_browser_write = os.pipe()
        from_browser_read, from_browser_write = os.pipe()
        # Move the child's ends above 10 so the dup2 onto 3 and 4 cannot overwrite each other.
        child_read = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD_CLOEXEC, 10)
        child_write = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_read)
        os.close(from_browser_write)

        def wire_pipe() -> None:
            os.dup2(child_read, 3)
            os.dup2(child_write, 4)

        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            close_fds=False, preexec_fn=wire_pipe)
        os.close(child_read)
        os.close(child_write)
        self._out = to_browser_write
        self._in = from_browser_read
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        self._replies: dict[int, dict] = {}
        try:
            self.call("Browser.getVersion")
        except BrowserError:
            self.close()
            raise

    # -- protocol ----------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._in], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                stderr = self.process.stderr.read().decode(errors="replace") if \
                    self.process.poll() is not None else ""
                raise BrowserError(f"Chromium closed the DevTools pipe: {stderr[-2000:]}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        request = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        os.write(self._out, json.dumps(request).encode() + b"\0")
        return self._next_id

    def _pump(self, deadline: float) -> None:
        """Read one message: keep a reply by its id, an event in order; dismiss any dialog."""
        message = self._read_message(deadline)
        if "id" in message:
            self._replies[message["id"]] = message
            return
        if message.get("method") == "Page.javascriptDialogOpening":
            # alert() blocks the page until answered; answer without waiting for the reply.
            self._send("Page.handleJavaScriptDialog", {"accept": True}, message.get("sessionId"))
        self._events.append(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        request_id = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout
        while request_id not in self._replies:
            self._pump(deadline)
        reply = self._replies.pop(request_id)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _wait_event(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for index, event in enumerate(self._events):
                if event["method"] == method and event.get("sessionId") == session:
                    return self._events.pop(index)
            self._pump(deadline)

    # -- pages -------------------------------------------------------------------------------

    def open(self, path: Path, width: int = 1366) -> Page:
        """Load a local file and collect what happened while it loaded."""
        url = Path(path).resolve().as_uri()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                  session)
        self.call("Page.navigate", {"url": url}, session)
        self._wait_event("Page.loadEventFired", session)
        page = Page(url, session, self)
        # Let late console messages arrive: a round trip flushes what was sent before it.
        page.evaluate("document.readyState")
        for event in [e for e in self._events if e.get("sessionId") == session]:
            self._events.remove(event)
            method, params = event["method"], event["params"]
            if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert",
                                                                             "warning"):
                page.console_errors.append(" ".join(str(a.get("value", a.get("description")))
                                                    for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                page.exceptions.append(f"{details.get('text', '')} "
                                       f"{details.get('exception', {}).get('description', '')}"
                                       f" at {details.get('url', '')}:{details.get('lineNumber')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                page.console_errors.append(f"{params['entry']['source']}: "
                                           f"{params['entry']['text']}")
            elif method == "Page.javascriptDialogOpening":
                page.dialogs.append(params.get("message", ""))
            elif method == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
        return page

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    self.call("Browser.close")
                except BrowserError:
                    pass
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            for fd in (self._out, self._in):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if self.process.stderr:
                self.process.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)
