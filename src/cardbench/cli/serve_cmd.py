"""`cardbench serve`: the station server (cardbench.server), and its station tokens."""

from __future__ import annotations

import json
import os

import click

from cardbench.cli import params
from cardbench.errors import UsageError
from cardbench.server import tokens
from cardbench.store.core import open_store, parse_target


def _bind(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        return (host.strip("[]") or "127.0.0.1"), int(port)
    except ValueError:
        raise UsageError(f"--bind {text!r}: give HOST:PORT, e.g. 127.0.0.1:8080") from None


@click.group("serve", invoke_without_command=True, epilog=params.examples(
    "cardbench serve --db postgresql://bench@localhost/cards --workers 2",
    "cardbench serve --bind 0.0.0.0:8443 --ssl-keyfile k.pem --ssl-certfile c.pem",
    "cardbench serve token add station-2"))
@params.db_option
@click.option("--bind", "bind", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Where to listen (127.0.0.1 by default: put a reverse proxy in front, or bind wider on purpose).")
@click.option("--read-token", envvar="CARDBENCH_READ_TOKEN", help="Reading (pages, API) takes this token too "
              "(default: reading is public).")
@click.option("--max-body", callback=params.size, default="16MiB", show_default=True,
              help="The largest request body taken.")
@click.option("--live-rate", type=click.FloatRange(min=0), default=50, show_default=True, metavar="N",
              help="Live events (progress) a station may send a second; past it 429 (0: no limit).")
@click.option("--upload-rate", type=click.FloatRange(min=0), default=0, show_default=True, metavar="N",
              help="Uploads a station may send a second; past it 429 (0: no limit).")
@click.option("--ssl-keyfile", type=click.Path(exists=True, dir_okay=False), help="TLS key (passed to uvicorn).")
@click.option("--ssl-certfile", type=click.Path(exists=True, dir_okay=False), help="TLS certificate (uvicorn).")
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="App server processes on the one port (PostgreSQL only): one a core. A process's "
                   "event loop waits while PostgreSQL answers a write, and a second fills those "
                   "waits (docs/scaling.md).")
@click.pass_context
def serve(ctx, db, bind, read_token, max_body, live_rate, upload_rate, ssl_keyfile, ssl_certfile, log_level,
          workers):
    """Serve the store's results to a lab: pages, live stations and the JSON API (/api/v1).

    Stations share with `cardbench run|verify|drawer|import --share URL --token TOKEN`; a token
    comes from `cardbench serve token add STATION`.
    """
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    if ctx.invoked_subcommand is not None:
        return
    try:   # function-level: the server's extra (starlette, uvicorn) is optional; without it, one line
        import uvicorn

        from cardbench.server.app import APP_ENV, create_app
    except ImportError as e:
        raise UsageError(f"the server needs its extra: pip install 'cardbench[server]' ({e.name} is missing)") \
            from None
    host, port = _bind(bind)
    # uvicorn's standard extras (httptools, uvloop: the server extra) where installed, else h11 and
    # asyncio (bench/serve_load.py measures both); a line per request only at --log-level info or debug
    opts = dict(host=host, port=port, log_level=log_level, ssl_keyfile=ssl_keyfile, ssl_certfile=ssl_certfile,
                server_header=False, timeout_graceful_shutdown=5,
                access_log=log_level in ("info", "debug"))
    if workers > 1:
        if parse_target(db)[0] != "postgresql":
            raise UsageError("--workers above 1 needs a PostgreSQL store (--db postgresql://...): a SQLite file "
                             "is served by one process")
        with open_store(db) as store:       # create / migrate once, and fail now on a bad --db
            where = store.location
        os.environ[APP_ENV] = json.dumps({"db": db, "read_token": read_token, "max_body": max_body,
                                         "live_rate": live_rate, "upload_rate": upload_rate})
        click.echo(f"cardbench serve: http://{host}:{port}/ (store {where}, {workers} workers)", err=True)
        uvicorn.run("cardbench.server.app:app_from_env", factory=True, workers=workers, **opts)
        return
    app = create_app(db, read_token=read_token, max_body=max_body, live_rate=live_rate, upload_rate=upload_rate)
    click.echo(f"cardbench serve: http://{host}:{port}/ (store {app.state.server.location})", err=True)
    uvicorn.run(app, **opts)


@serve.group("token")
def token():
    """Station tokens: add (shown once, stored hashed), list, revoke."""


@token.command("add")
@click.argument("station")
@params.db_option
@click.pass_context
def token_add(ctx, station, db):
    """Make a token for STATION; it is printed once, only its hash is kept."""
    with _store_for(ctx, db) as store:
        t = tokens.add(store, station)
    click.echo(t)
    click.echo(f"the token of station {station!r}: shown once, keep it on that station "
               "(CARDBENCH_TOKEN or --token)", err=True)


@token.command("list")
@params.db_option
@click.pass_context
def token_list(ctx, db):
    """Every token: id, station, created, revoked (never the token itself)."""
    with _store_for(ctx, db) as store:
        rows = tokens.listing(store)
    for t in rows:
        click.echo(f"{t.id}\t{t.station}\t{t.created_at}\t{'revoked ' + t.revoked_at if t.revoked_at else 'live'}"
                   f"\t{t.hash_prefix}…")
    if not rows:
        click.echo("no tokens yet: cardbench serve token add STATION")


@token.command("revoke")
@click.argument("which")
@params.db_option
@click.pass_context
def token_revoke(ctx, which, db):
    """Revoke a station's tokens (by station name) or one token (by its id from `token list`)."""
    with _store_for(ctx, db) as store:
        n = tokens.revoke(store, which)
    click.echo(f"revoked {n} token{'s' if n != 1 else ''}")


def _store_for(ctx, db):
    return open_store(db or (ctx.obj or {}).get("db"))
