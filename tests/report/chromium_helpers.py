"""Headless Chromium runs and a tiny PNG decoder for the HTML report tests."""

import os
import shutil
import signal
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr",
                  "--v=0"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """Headless Chromium runs, each in its own process group, killed whole afterwards."""

    def __init__(self, binary: str):
        self.binary = binary

    def render(self, html_path: Path, png_path: Path, *, width: int = 1200, height: int = 2000,
               timeout: float = 60) -> tuple[str, list[str]]:
        """Load the page; take a screenshot; return (DOM after load, console lines)."""
        profile = tempfile.mkdtemp(prefix="cbchrome")
        cmd = [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
               f"--screenshot={png_path}", f"--window-size={width},{height}", html_path.resolve().as_uri()]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)      # renderer / gpu children, if any linger
            except ProcessLookupError:
                pass
            if proc.poll() is None:
                proc.wait(timeout=10)
            _kill_leftovers(profile)
            shutil.rmtree(profile, ignore_errors=True)
        assert proc.returncode == 0, f"chromium exited {proc.returncode}: {err[-2000:]}"
        console = [line for line in err.splitlines() if ":CONSOLE" in line]
        return out, console


def _pids_using(marker: str) -> list[int]:
    """Processes whose command line holds ``marker`` (our unique --user-data-dir): the ones we started,
    including zygote children that left our process group."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def _kill_leftovers(profile: str) -> None:
    for pid in _pids_using(f"--user-data-dir={profile}"):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into rows of raw pixels."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) for r in rows] if bpp == 3 else [
        b"".join(r[i:i + 3] for i in range(0, len(r), 4)) for r in rows]
