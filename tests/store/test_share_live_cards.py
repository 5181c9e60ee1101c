"""share.LiveCards: many cards' progress to a station's live page (issue 31, section 3), sent to
a real HTTP server on 127.0.0.1 that keeps what it was sent: the contract's extended body, the
first event of each card carrying its identity (and again until one was delivered), the latest
event of each card, never the measurement held up by a server that is down."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cardbench.share import LiveCards


class Keeper(BaseHTTPRequestHandler):
    bodies: list[dict] = []
    fail_first = 0

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/api/v1/live" and self.headers["Authorization"] == "Bearer tok"
        if Keeper.fail_first:
            Keeper.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        Keeper.bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"ok": true}')

    def log_message(self, *args):
        pass


def serve():
    Keeper.bodies = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Keeper)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def wait_for(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, Keeper.bodies
        time.sleep(0.02)


def test_each_card_announced_once_then_its_latest_state():
    srv, url = serve()
    try:
        live = LiveCards(url, "tok", every=0.05)
        ident = {"brand": "SanDisk", "serial": "0x01", "capacity_bytes": 32_000_000}
        live.update("sd:0x01", "/dev/sdb SanDisk", "endurance round 1, write", identity=ident, kind="endurance",
                    round=1, bytes_written=1 << 20, rate_bytes_per_s=2e7, bad_fraction=None, eta_s=30.0)
        live.update("sd:0x02", "/dev/sdc Lenovo", "endurance round 1, write", identity={"brand": "Lenovo"},
                    kind="endurance", round=1, bytes_written=0)
        wait_for(lambda: len(Keeper.bodies) >= 2)
        for n in range(2, 6):        # many updates at once: the latest is what counts
            live.update("sd:0x01", "/dev/sdb SanDisk", f"endurance round {n}, read", identity=ident,
                        kind="endurance", round=n, bytes_written=n << 20, rate_bytes_per_s=4e7, bad_fraction=0.0,
                        eta_s=None)
        live.close()
    finally:
        srv.shutdown()
    first = {b["card"]["key"]: b for b in Keeper.bodies[:2]}
    assert first["sd:0x01"]["card"] == {"key": "sd:0x01", "label": "/dev/sdb SanDisk", "identity": ident}
    assert first["sd:0x01"] | {"card": None} == {
        "task": "endurance round 1, write", "card": None, "kind": "endurance", "round": 1,
        "bytes_written": 1 << 20, "rate_bytes_per_s": 2e7, "bad_fraction": None, "eta_s": 30.0}
    assert first["sd:0x02"]["card"]["identity"] == {"brand": "Lenovo"}
    later = [b for b in Keeper.bodies[2:] if b["card"]["key"] == "sd:0x01"]
    assert later and all("identity" not in b["card"] for b in later)
    assert later[-1]["round"] == 5 and later[-1]["task"] == "endurance round 5, read"


def test_an_identity_not_delivered_goes_with_the_next_event():
    srv, url = serve()
    Keeper.fail_first = 1
    try:
        live = LiveCards(url, "tok", every=0.05)
        live.update("k", "card", "round 1", identity={"serial": "1"}, round=1)
        time.sleep(0.3)
        live.update("k", "card", "round 2", round=2)
        live.close()
    finally:
        srv.shutdown()
    assert Keeper.bodies[0]["round"] == 2 and Keeper.bodies[0]["card"]["identity"] == {"serial": "1"}


def test_a_card_without_identity_is_announced_all_the_same():
    srv, url = serve()
    try:
        live = LiveCards(url, "tok", every=0.05)
        live.update("/dev/sdb", "/dev/sdb", "round 1", round=1)
        wait_for(lambda: Keeper.bodies)
        live.update("/dev/sdb", "/dev/sdb", "round 2", round=2)
        live.close()
    finally:
        srv.shutdown()
    assert Keeper.bodies[0]["card"] == {"key": "/dev/sdb", "label": "/dev/sdb", "identity": {}}
    assert "identity" not in Keeper.bodies[-1]["card"] and Keeper.bodies[-1]["round"] == 2


def test_a_server_that_is_down_holds_nothing_up():
    live = LiveCards("http://127.0.0.1:9", "tok", every=0.05)    # the discard port: nothing listens
    t0 = time.monotonic()
    for n in range(200):
        live.update("k", "card", f"round {n}", round=n)
    assert time.monotonic() - t0 < 0.5
    live.close()
    assert live.sent == 0
