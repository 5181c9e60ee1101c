"""The control channel of an emulator server: a unix stream socket, one JSON line each way.

Socket: ``<workdir>/control.sock`` (mode 0600, root only). A request is one JSON object on one
line with an ``op`` field; the answer is one JSON object on one line, ``{"ok": true, ...}`` or
``{"ok": false, "error": "<one line>", "kind": "usage"|"error"}``. One request per connection.

Operations (``card`` is a card name):

=============  =====================================================  ======================
op             arguments                                              answer
=============  =====================================================  ======================
ping                                                                  ready, pid, mountpoint
status         card (optional)                                        status (reader or card)
set            card, settings {write_rate, read_rate, latency,        status (card)
               cache_bytes, cache_rate, cache_idle, errors, paced,
               turnaround, volatile_bytes, drain_rate, flush,
               pull_damage, wear_cycles, wear_spread, wear_seed,
               wear_block, wear_mode, wear_readonly_at}
set_reader     ceiling (bytes/s or null)                              status (reader)
yank           card                                                   status (card)
pull           card (loses the volatile cache, then as yank)          status (card), lost_now
reinsert       card (answers again, with what it kept)                status (card)
wear           card, full (bool: per-block arrays too)                wear (the wear model's truth)
add_card       spec (CardSpec.to_json())                              path of the card file
remove_card    card
shutdown       (detach our loop devices, unmount; server then exits)
=============  =====================================================  ======================

Anyone can drive it by hand, e.g.
``echo '{"op":"set","card":"card0","settings":{"write_rate":2e6}}' | socat - UNIX:/run/cardbench/emulate/card0/control.sock``.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from cardbench.errors import CardbenchError, UsageError

SOCKET_NAME = "control.sock"


class ServerGone(CardbenchError):
    """The emulator server does not answer (not running, crashed or hung)."""


def call(sock_path: str, op: str, *, timeout: float = 10.0, **args: Any) -> dict[str, Any]:
    """Send one request; return the answer dict. Raises ServerGone or the server's error."""
    request = json.dumps({"op": op, **args}).encode() + b"\n"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(sock_path)
            s.sendall(request)
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
    except (OSError, socket.timeout) as e:
        raise ServerGone(f"emulator server at {sock_path} does not answer ({e.__class__.__name__}: {e})") from None
    if not buf:
        raise ServerGone(f"emulator server at {sock_path} closed the connection without an answer")
    answer = json.loads(buf)
    if not answer.get("ok"):
        if answer.get("kind") == "usage":
            raise UsageError(answer.get("error", "bad request"))
        raise CardbenchError(answer.get("error", "emulator server error"))
    return answer
