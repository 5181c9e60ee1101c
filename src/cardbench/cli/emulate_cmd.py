"""`cardbench emulate ...`: named emulated cards for people (a thin layer over cardbench.emulate.manage).

An emulated card is a loop device paced by a detached server process; its state lives in
/run/cardbench/emulate/NAME (or $CARDBENCH_EMULATE_ROOT/NAME). Sizes accept 64MiB / 1GB,
rates 4.9MB/s / 20MiB/s / 133x, durations 0 / 5ms / 1s.
"""

from __future__ import annotations

import json
import re

import click

from cardbench.cli import params

from cardbench.errors import UsageError
from cardbench.units import UnitError, fmt_rate, fmt_size, parse_duration, parse_rate, parse_size


def _size(value: str | None, what: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except UnitError as e:
        raise UsageError(f"{what}: {e}") from None


def _rate(value: str | None, what: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_rate(value)
    except UnitError as e:
        raise UsageError(f"{what}: {e}") from None


def _seconds(value: str | None, what: str) -> float | None:
    if value is None:
        return None
    if re.fullmatch(r"\s*0+(\.0*)?\s*(s|ms)?\s*", value):
        return 0.0
    try:
        return parse_duration(value)
    except UnitError as e:
        raise UsageError(f"{what}: {e}") from None


def _errors(values: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """--error START:END[:KIND] (sizes, END exclusive; KIND read|write|both)."""
    out = []
    for v in values:
        parts = v.split(":")
        if len(parts) not in (2, 3):
            raise UsageError(f"--error wants START:END[:read|write|both], got {v!r}")
        start = 0 if parts[0].strip() in ("0", "") else _size(parts[0], "--error start")
        end = _size(parts[1], "--error end")
        kind = parts[2] if len(parts) == 3 else "both"
        out.append((start, end, kind))
    return out


def _print_status(st: dict) -> None:
    name = st.get("name")
    if not st.get("running", True):
        click.echo(f"{name}: not running (stale state in {st.get('workdir')}; run: cardbench emulate stop {name})")
        return
    c = st.get("counters", {})
    size = st.get("size")
    shown = f"{fmt_size(size, binary=True)} ({fmt_size(size)})" if size and size % (1 << 20) == 0 else fmt_size(size)
    line = [f"{name}: {st.get('device') or '-'}", f"size {shown}",
            f"write {fmt_rate(st.get('write_rate'))}", f"read {fmt_rate(st.get('read_rate'))}"]
    if st.get("latency"):
        line.append(f"latency {st['latency'] * 1e3:g} ms")
    if st.get("real_size"):
        line.append(f"fake: keeps {fmt_size(st['real_size'], binary=True)} ({st.get('fake_mode')})")
    if st.get("cache_bytes"):
        line.append(f"cache {fmt_size(st['cache_bytes'])} at {fmt_rate(st.get('cache_rate'))} "
                    f"after {st.get('cache_idle'):g} s idle")
    if st.get("ceiling"):
        line.append(f"reader ceiling {fmt_rate(st['ceiling'])}")
    if st.get("errors"):
        line.append("EIO on " + ", ".join(f"[{a}, {b}) {k}" for a, b, k in st["errors"]))
    if st.get("yanked"):
        line.append("YANKED")
    if st.get("paced") is False:
        line.append("unpaced")
    click.echo(", ".join(line))
    if c:
        click.echo(f"  {c.get('writes', 0)} writes ({fmt_size(c.get('bytes_written', 0))}), "
                   f"{c.get('reads', 0)} reads ({fmt_size(c.get('bytes_read', 0))}), {c.get('eio', 0)} EIO")


@click.group("emulate", epilog=params.examples(
    "cardbench emulate start --name slow --size 64MiB --write-rate 1MB/s",
    "cardbench emulate stop --all"))
def emulate() -> None:
    """Emulated cards of known speed: loop devices paced by a userspace server (needs root and FUSE)."""


@emulate.command("start")
@click.option("--name", default="emucard", show_default=True, help="Name of the emulated card.")
@click.option("--size", default="64MiB", show_default=True, help="Advertised capacity, e.g. 64MiB or 1GB.")
@click.option("--write-rate", default="10MB/s", show_default=True, help="Write rate, e.g. 4.9MB/s.")
@click.option("--read-rate", default="20MB/s", show_default=True, help="Read rate, e.g. 20MB/s.")
@click.option("--latency", default="0", show_default=True, help="Added to every request, e.g. 2ms.")
@click.option("--real-size", help="Fake card: bytes really kept (less than --size).")
@click.option("--fake-mode", type=click.Choice(["wraparound", "drop"]), default="wraparound", show_default=True,
              help="Fake card: writes past --real-size wrap around or are dropped (read back as zeros).")
@click.option("--cache-size", help="Write cache: bytes written fast after an idle pause.")
@click.option("--cache-rate", help="Write cache rate, e.g. 60MB/s.")
@click.option("--cache-idle", default="1s", show_default=True, help="Idle pause that refills the cache.")
@click.option("--ceiling", help="A reader in front limiting the rate, e.g. 30MB/s.")
@click.option("--error", "errors", multiple=True, metavar="START:END[:KIND]",
              help="EIO for I/O touching bytes [START, END); KIND read, write or both. Repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def start_cmd(name, size, write_rate, read_rate, latency, real_size, fake_mode, cache_size, cache_rate,
              cache_idle, ceiling, errors, as_json):
    """Start an emulated card; prints its loop device. It runs until `cardbench emulate stop NAME`."""
    from cardbench.emulate import CardSpec
    from cardbench.emulate import manage

    spec = CardSpec(size=_size(size, "--size"), write_rate=_rate(write_rate, "--write-rate"),
                    read_rate=_rate(read_rate, "--read-rate"), latency=_seconds(latency, "--latency"),
                    real_size=_size(real_size, "--real-size"), fake_mode=fake_mode,
                    cache_bytes=_size(cache_size, "--cache-size") or 0, cache_rate=_rate(cache_rate, "--cache-rate"),
                    cache_idle=_seconds(cache_idle, "--cache-idle"), errors=_errors(errors), name=name)
    st = manage.start(spec, ceiling=_rate(ceiling, "--ceiling"))
    if as_json:
        click.echo(json.dumps(st, indent=2))
    else:
        click.echo(st["device"])


@emulate.command("set")
@click.argument("name")
@click.option("--write-rate", help="Write rate, e.g. 4.9MB/s.")
@click.option("--read-rate", help="Read rate.")
@click.option("--latency", help="Added to every request, e.g. 2ms (0 for none).")
@click.option("--cache-size", help="Write cache size (0 for none).")
@click.option("--cache-rate", help="Write cache rate.")
@click.option("--cache-idle", help="Idle pause that refills the cache.")
@click.option("--ceiling", help="Reader ceiling, or 'none'.")
@click.option("--error", "errors", multiple=True, metavar="START:END[:KIND]",
              help="Replace the EIO ranges (repeatable).")
@click.option("--clear-errors", is_flag=True, help="Remove all EIO ranges.")
@click.option("--paced/--unpaced", default=None, help="Unpaced: full speed (e.g. while formatting).")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def set_cmd(name, write_rate, read_rate, latency, cache_size, cache_rate, cache_idle, ceiling, errors,
            clear_errors, paced, as_json):
    """Change settings of a running emulated card."""
    from cardbench.emulate import manage

    settings: dict = {}
    for key, value in (("write_rate", _rate(write_rate, "--write-rate")), ("read_rate", _rate(read_rate, "--read-rate")),
                       ("latency", _seconds(latency, "--latency")), ("cache_rate", _rate(cache_rate, "--cache-rate")),
                       ("cache_idle", _seconds(cache_idle, "--cache-idle")), ("paced", paced)):
        if value is not None:
            settings[key] = value
    if cache_size is not None:
        settings["cache_bytes"] = 0 if cache_size.strip() == "0" else _size(cache_size, "--cache-size")
    if errors and clear_errors:
        raise UsageError("use either --error or --clear-errors")
    if errors or clear_errors:
        settings["errors"] = _errors(errors)
    if ceiling is not None:
        settings["ceiling"] = None if ceiling.strip().lower() in ("none", "0", "") else _rate(ceiling, "--ceiling")
    if not settings:
        raise UsageError("nothing to set (see: cardbench emulate set --help)")
    st = manage.set_card(name, **settings)
    if as_json:
        click.echo(json.dumps(st, indent=2))
    else:
        _print_status(st)


@emulate.command("yank")
@click.argument("name")
def yank_cmd(name):
    """Pull the card out: from now on every I/O on it fails with EIO."""
    from cardbench.emulate import manage

    st = manage.yank(name)
    click.echo(f"{name}: yanked; I/O on {st.get('device')} now fails with EIO")


@emulate.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_cmd(name, as_json):
    """Settings and counters of one or all emulated cards."""
    from cardbench.emulate import manage

    entries = manage.status(name)
    if as_json:
        click.echo(json.dumps(entries if name is None else entries[0], indent=2))
        return
    if not entries:
        click.echo("no emulated cards")
    for st in entries:
        _print_status(st)


@emulate.command("stop")
@click.argument("name", required=False)
@click.option("--all", "stop_all", is_flag=True, help="Stop every emulated card.")
def stop_cmd(name, stop_all):
    """Stop an emulated card: unmount, detach the loop device, stop its server, remove its state."""
    from cardbench.emulate import manage

    if stop_all == (name is not None):
        raise UsageError("give a NAME or --all")
    if stop_all:
        stopped = manage.stop_all()
        click.echo(f"stopped {len(stopped)} emulated card(s)" + (f": {', '.join(stopped)}" if stopped else ""))
    else:
        manage.stop(name)
        click.echo(f"{name}: stopped")
