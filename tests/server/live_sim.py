"""Simulated endurance cards telling station servers their progress, and the live pages' event
streams read as a browser reads them: for the two-server tests and bench/live_load.py.

Each station posts its cards' progress (``POST /api/v1/live``, the endurance contract's body:
the first event of a card announces it) to one server, over one keep-alive connection, and its
live page's stream (``/live/STATION/events``) is read on ANOTHER server: an event's lag is the
time from its sending to the first event of that card, with at least its ``done``, in the other
server's stream.
"""

from __future__ import annotations

import http.client
import json
import statistics
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit


def _conn(url: str, timeout: float = 20) -> http.client.HTTPConnection:
    u = urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


class EventStream:
    """``GET URL/live/STATION/events`` read in a thread: every event as (time received, name, data)."""

    def __init__(self, url: str, station: str, query: str = ""):
        self.url, self.station, self.query = url, station, query
        self.events: list[tuple[float, str, dict]] = []
        self.connected = threading.Event()
        self.closed = False
        self.conn = _conn(url, timeout=60)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            self.conn.request("GET", f"/live/{quote(self.station, safe='')}/events{self.query}")
            resp = self.conn.getresponse()
            buf = b""
            while not self.closed:
                chunk = resp.read1(65536)
                if not chunk:
                    return
                buf += chunk
                while b"\n\n" in buf:
                    block, buf = buf.split(b"\n\n", 1)
                    self._block(block.decode())
        except (OSError, http.client.HTTPException, ValueError, AttributeError):    # AttributeError: closed
            return

    def _block(self, block: str) -> None:
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith(": connected"):
                self.connected.set()
            elif line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if name is not None:
            self.events.append((time.monotonic(), name, data or {}))

    def seen(self, name: str) -> list[tuple[float, dict]]:
        return [(t, d) for t, n, d in list(self.events) if n == name]

    def close(self) -> None:
        self.closed = True
        try:
            if self.conn.sock is not None:
                self.conn.sock.shutdown(2)
        except OSError:
            pass
        self.conn.close()
        self.thread.join(timeout=5)


def identity(station: str, j: int) -> dict:
    return {"brand": "SimCard", "name": f"Endure {station}", "capacity_bytes": 32_000_000_000,
            "serial": f"0x{j:04X}", "identity": f"serial:{station}-{j}|32000000000"}


def body(station: str, j: int, k: int, *, announce: bool, total: int = 32_000_000_000) -> dict:
    """Card j's k-th event (k from 0): done grows by 100 MB an event."""
    card: dict = {"key": f"{station}/card-{j}", "label": f"SimCard {station} #{j}"}
    if announce:
        card["identity"] = identity(station, j)
    done = (k + 1) * 100_000_000
    return {"task": "endurance", "done": done, "total": total, "card": card, "kind": "endurance",
            "round": 1 + done // total, "bytes_written": done, "rate_bytes_per_s": 2.0e7, "bad_fraction": 0.0,
            "eta_s": 3600.0}


def post_live(conn: http.client.HTTPConnection, token: str, doc: dict) -> int:
    data = json.dumps(doc).encode()
    conn.request("POST", "/api/v1/live", body=data, headers={"Authorization": f"Bearer {token}",
                                                             "Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    return resp.status


@dataclass
class Sent:
    station: str
    key: str
    done: int
    at: float            # time.monotonic() just before sending
    status: int


@dataclass
class Outcome:
    sent: list[Sent] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    unseen: list[Sent] = field(default_factory=list)

    @property
    def failed(self) -> list[Sent]:
        return [s for s in self.sent if s.status != 200]

    def figures(self) -> dict:
        lags = sorted(self.lags)
        q = (lambda p: lags[min(len(lags) - 1, int(p * len(lags)))]) if lags else (lambda p: float("nan"))
        return {"events": len(self.sent), "failed": len(self.failed), "unseen": len(self.unseen),
                "lag_p50_s": statistics.median(lags) if lags else float("nan"), "lag_p99_s": q(0.99),
                "lag_max_s": lags[-1] if lags else float("nan")}


def simulate(servers: list[str], tokens: dict[str, str], *, cards: int, every: float, seconds: float,
             settle: float = 5.0) -> Outcome:
    """``cards`` cards spread over the stations of ``tokens`` (station i posts to servers[i % n],
    its stream is read on servers[(i + 1) % n]), each sending progress every ``every`` s for
    ``seconds``; then ``settle`` s for the streams to catch up."""
    stations = sorted(tokens)
    per = {st: [j for j in range(cards) if j % len(stations) == i] for i, st in enumerate(stations)}
    streams = {st: EventStream(servers[(i + 1) % len(servers)], st) for i, st in enumerate(stations)}
    out = Outcome()
    lock = threading.Lock()
    for s in streams.values():
        assert s.connected.wait(20), f"the event stream of {s.station} did not open"
    start = time.monotonic() + 0.5

    def station(i: int, st: str) -> None:
        conn = _conn(servers[i % len(servers)])
        mine = per[st]
        # card j's k-th event at start + (k + offset_j) * every, offsets spread over one period
        plan = sorted((start + (k + n / max(1, len(mine))) * every, j, k)
                      for n, j in enumerate(mine) for k in range(max(1, int(seconds / every))))
        for when, j, k in plan:
            time.sleep(max(0.0, when - time.monotonic()))
            doc = body(st, j, k, announce=(k == 0))
            t = time.monotonic()
            try:
                status = post_live(conn, tokens[st], doc)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = _conn(servers[i % len(servers)])
                status = 0
            with lock:
                out.sent.append(Sent(st, doc["card"]["key"], doc["done"], t, status))
        conn.close()

    threads = [threading.Thread(target=station, args=(i, st), daemon=True) for i, st in enumerate(stations)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(settle)
    for s in streams.values():
        s.close()
    for ev in out.sent:
        if ev.status != 200:
            continue
        seen = [t for t, d in streams[ev.station].seen("card") if d.get("key") == ev.key and (d.get("done") or 0) >= ev.done
                and t >= ev.at]
        if seen:
            out.lags.append(min(seen) - ev.at)
        else:
            out.unseen.append(ev)
    return out
