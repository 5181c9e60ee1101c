"""Headless Chromium driven over its DevTools pipe (--remote-debugging-pipe): open a page, wait for
something to appear in its live DOM (what a person would see without reloading), take a screenshot.
No client library: the protocol is JSON messages ending in NUL on fds 3 and 4."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "report"))
from chromium_helpers import CHROMIUM_FLAGS, _kill_leftovers, find_chromium  # noqa: E402


class Browser:
    def __init__(self, binary: str | None = None):
        binary = binary or find_chromium()
        self.profile = tempfile.mkdtemp(prefix="cbcdp")
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        hi_r = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)

        def child():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)
        flags = [f for f in CHROMIUM_FLAGS if f not in ("--enable-logging=stderr", "--v=0")]
        self.proc = subprocess.Popen([binary, *flags, "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
                                      "about:blank"], pass_fds=(3, 4), preexec_fn=child, start_new_session=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_r, from_w, hi_r, hi_w):
            os.close(fd)
        self.w = os.fdopen(to_w, "wb", buffering=0)
        self.r = os.fdopen(from_r, "rb", buffering=0)
        self.buf = b""
        self.n = 0

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30):
        self.n += 1
        msg = {"id": self.n, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.w.write(json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            while b"\0" not in self.buf:
                chunk = self.r.read(65536)
                if not chunk:
                    raise RuntimeError("chromium closed its pipe")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            got = json.loads(raw)
            if got.get("id") == self.n:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                return got.get("result", {})
        raise TimeoutError(method)

    def open(self, url: str, width: int = 1200, height: int = 900) -> str:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, s)
        self.send("Page.enable", {}, s)
        self.send("Page.navigate", {"url": url}, s)
        self.wait_for(s, "document.readyState === 'complete'")
        return s

    def evaluate(self, s: str, expr: str):
        return self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, s)["result"].get("value")

    def wait_for(self, s: str, expr: str, timeout: float = 15) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.evaluate(s, expr):
                return True
            time.sleep(0.1)
        return False

    def dom(self, s: str) -> str:
        return self.evaluate(s, "document.documentElement.outerHTML")

    def screenshot(self, s: str, path: Path, full: bool = True) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": full}, s)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - killed below either way
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        _kill_leftovers(self.profile)
        shutil.rmtree(self.profile, ignore_errors=True)
        for f in (self.w, self.r):
            try:
                f.close()
            except OSError:
                pass
