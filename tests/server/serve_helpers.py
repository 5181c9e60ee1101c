"""Helpers of the station server's tests: a real `cardbench serve` child process, the CLI in a
child process with its own home (outbox), station tokens."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "store"))
SRC = str(HERE.parent.parent / "src")

from cardbench_factories import make_result, running_postgres  # noqa: E402,F401


def child_env(home: Path | None = None) -> dict:
    env = dict(os.environ)
    env.pop("CARDBENCH_DEBUG", None)
    env.pop("CARDBENCH_SHARE", None)
    env.pop("CARDBENCH_TOKEN", None)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if home is not None:
        env["HOME"] = str(home)
        env["XDG_DATA_HOME"] = str(home / "data")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str, home: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cardbench", *args], capture_output=True, text=True,
                          timeout=timeout, env=child_env(home))


class ServeProcess:
    """`cardbench serve --db DB --bind 127.0.0.1:PORT` as a child; start, stop, restart."""

    def __init__(self, db: str, *extra: str, home: Path | None = None):
        self.db, self.extra, self.home = db, extra, home
        self.port = free_port()
        self.scheme = "https" if "--ssl-certfile" in extra else "http"
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "ServeProcess":
        self.proc = subprocess.Popen([sys.executable, "-m", "cardbench", "serve", "--db", self.db, "--bind",
                                      f"127.0.0.1:{self.port}", *self.extra], env=child_env(self.home),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cardbench serve ended: {self.proc.stderr.read()[-2000:]}")
            try:
                import ssl
                unverified = ssl._create_unverified_context() if self.scheme == "https" else None
                with urllib.request.urlopen(self.url + "/api/v1/results?card=none-such", timeout=2,
                                            context=unverified):
                    return self
            except urllib.error.HTTPError:      # an answer (401 with --read-token): it is up
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("cardbench serve did not answer within 30 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()


def token_for(db: str, station: str) -> str:
    r = cli("serve", "token", "add", station, "--db", db)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()
