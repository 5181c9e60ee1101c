"""ASGI apps for bench/serve_load.py, by import string (``serve_apps:cardbench_app``), so each HTTP
server under test (uvicorn with h11/asyncio, uvicorn with httptools/uvloop, granian) loads the
same app its own way:

  cardbench_app   a factory: cardbench's station server over the store $CARDBENCH_BENCH_DB
  trivial         a bare ASGI app that reads the body and answers ``{"ok":true}``: what the HTTP
                  server and the load generator cost without cardbench
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))


def cardbench_app():
    from cardbench.server.app import create_app
    return create_app(os.environ["CARDBENCH_BENCH_DB"])


async def trivial(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        msg = await receive()
        more = msg.get("more_body", False)
    body = b'{"ok":true}'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
