"""`cardbench emulate ...`: named emulated cards for people (a thin layer over cardbench.emulate.manage).

An emulated card is a loop device paced by a detached server process; its state lives in
/run/cardbench/emulate/NAME (or $CARDBENCH_EMULATE_ROOT/NAME). Sizes accept 64MiB / 1GB,
rates 4.9MB/s / 20MiB/s / 133x, durations 0 / 5ms / 1s: read by cardbench.units (through
cli/params.py); the status is rendered by cardbench.report.emulate.
"""

from __future__ import annotations

import json

import click

from cardbench.cli import params
from cardbench.emulate import CardSpec, manage
from cardbench.emulate.spec import WEAR_MODES
from cardbench.errors import UsageError
from cardbench.report.emulate import render_emulate_status, render_wear
from cardbench.units import UnitError, parse_size


def _errors(ctx, param, values: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """--error START:END[:KIND] (sizes read by cardbench.units, END exclusive; KIND read|write|both)."""
    out = []
    for v in values:
        parts = v.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("read", "write", "both")):
            raise click.BadParameter(f"wants START:END[:read|write|both], got {v!r}")
        try:
            start, end = (parse_size(p.strip() or "0", minimum=0) for p in parts[:2])
        except UnitError as e:
            raise click.BadParameter(str(e)) from None
        out.append((start, end, parts[2] if len(parts) == 3 else "both"))
    return out


def _count_or_none(ctx, param, value: str | None) -> int | str | None:
    """A whole number, or ``none`` (kept as the string "none": turn it off)."""
    if value is None or value.strip().lower() in ("none", "off"):
        return None if value is None else "none"
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"wants a whole number or none, got {value!r}") from None


def _fraction_or_none(ctx, param, value: str | None) -> float | str | None:
    """A number, or ``none`` (kept as the string "none")."""
    if value is None or value.strip().lower() in ("none", "off"):
        return None if value is None else "none"
    try:
        return float(value)
    except ValueError:
        raise click.BadParameter(f"wants a number from 0 to 1 or none, got {value!r}") from None


def wear_options(fn):
    """The wear model's options (see CardSpec), shared by start and set."""
    for option in reversed((
        click.option("--wear-cycles", callback=_count_or_none, metavar="N|none",
                     help="Wear: the mean number of writes a wear block survives (none: no wear)."),
        click.option("--wear-spread", type=float,
                     help="Wear: the limits spread uniformly this fraction (0-1) around the mean."),
        click.option("--wear-seed", type=int, help="Wear: the seed of the limits."),
        click.option("--wear-block", callback=params.size_or_zero,
                     help="Wear: the wear block, e.g. 64KiB (0: the AU, else 64 KiB)."),
        click.option("--wear-mode", type=click.Choice(WEAR_MODES),
                     help="Wear: what a worn block does: writes dropped (stale), EIO, reads all FF, writes "
                          "land elsewhere (misplace), the card turns read-only, or mixed."),
        click.option("--wear-readonly-at", callback=_fraction_or_none, metavar="FRACTION|none",
                     help="Wear: the card turns read-only once this fraction of its blocks is worn."),
    )):
        fn = option(fn)
    return fn


def _wear_settings(wear_cycles, wear_spread, wear_seed, wear_block, wear_mode, wear_readonly_at) -> dict:
    """The wear options given, as CardSpec fields ("none" -> None)."""
    given = {"wear_cycles": wear_cycles, "wear_spread": wear_spread, "wear_seed": wear_seed,
             "wear_block": wear_block, "wear_mode": wear_mode, "wear_readonly_at": wear_readonly_at}
    return {k: (None if v == "none" else v) for k, v in given.items() if v is not None}


@click.group("emulate", epilog=params.examples(
    "cardbench emulate start --name slow --size 64MiB --write-rate 1MB/s",
    "cardbench emulate stop --all"))
def emulate() -> None:
    """Emulated cards of known speed: loop devices paced by a userspace server (needs root and FUSE)."""


@emulate.command("start")
@click.option("--name", default="emucard", show_default=True, help="Name of the emulated card.")
@click.option("--size", default="64MiB", show_default=True, callback=params.size,
              help="Advertised capacity, e.g. 64MiB or 1GB.")
@click.option("--write-rate", default="10MB/s", show_default=True, callback=params.rate,
              help="Write rate, e.g. 4.9MB/s.")
@click.option("--read-rate", default="20MB/s", show_default=True, callback=params.rate, help="Read rate, e.g. 20MB/s.")
@click.option("--latency", default="0", show_default=True, callback=params.seconds_or_zero,
              help="Added to every request, e.g. 2ms.")
@click.option("--real-size", callback=params.size, help="Fake card: bytes really kept (less than --size).")
@click.option("--fake-mode", type=click.Choice(["wraparound", "drop"]), default="wraparound", show_default=True,
              help="Fake card: writes past --real-size wrap around or are dropped (read back as zeros).")
@click.option("--cache-size", callback=params.size_or_zero, help="Write cache: bytes written fast after an idle pause.")
@click.option("--cache-rate", callback=params.rate, help="Write cache rate, e.g. 60MB/s.")
@click.option("--cache-idle", default="1s", show_default=True, callback=params.seconds_or_zero,
              help="Idle pause that refills the cache.")
@click.option("--ceiling", callback=params.rate, help="A reader in front limiting the rate, e.g. 30MB/s.")
@click.option("--volatile-cache", callback=params.size_or_zero,
              help="A volatile write cache (RAM): writes are acknowledged once in it and lost if the card is "
                   "pulled before they drain (0 for none).")
@click.option("--drain-rate", callback=params.rate, help="The rate the volatile cache drains at, e.g. 2MB/s.")
@click.option("--flush", type=click.Choice(["honest", "liar"]),
              help="What a flush does with the volatile cache: wait until it is empty, or return at once.")
@click.option("--error", "errors", multiple=True, metavar="START:END[:KIND]", callback=_errors,
              help="EIO for I/O touching bytes [START, END); KIND read, write or both. Repeatable.")
@click.option("--au", callback=params.size_or_zero, help="Flash geometry: the allocation unit, e.g. 4MiB or 12MiB.")
@click.option("--page", callback=params.size_or_zero, help="Flash geometry: the page, e.g. 16KiB.")
@click.option("--au-cross", default="0", show_default=True, callback=params.seconds_or_zero,
              help="Added to a request across an AU boundary, e.g. 0.3ms.")
@click.option("--page-cross", default="0", show_default=True, callback=params.seconds_or_zero,
              help="Added to a request across a page boundary, e.g. 0.15ms.")
@click.option("--open-aus", type=int, default=0, show_default=True, help="AUs kept open for writing (0: no limit).")
@click.option("--gc", "gc_seconds", default="0", show_default=True, callback=params.seconds_or_zero,
              help="A garbage collection: each AU opened past --open-aus costs this, e.g. 20ms.")
@click.option("--fat-aus", type=int, default=0, show_default=True, help="The first N AUs are FAT-tuned.")
@wear_options
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def start_cmd(name, size, write_rate, read_rate, latency, real_size, fake_mode, cache_size, cache_rate,
              cache_idle, ceiling, volatile_cache, drain_rate, flush, errors, au, page, au_cross, page_cross,
              open_aus, gc_seconds, fat_aus, wear_cycles, wear_spread, wear_seed, wear_block, wear_mode,
              wear_readonly_at, as_json):
    """Start an emulated card; prints its loop device. It runs until `cardbench emulate stop NAME`."""

    spec = CardSpec(size=size, write_rate=write_rate, read_rate=read_rate, latency=latency, real_size=real_size,
                    fake_mode=fake_mode, cache_bytes=cache_size or 0, cache_rate=cache_rate, cache_idle=cache_idle,
                    errors=errors, name=name, volatile_bytes=volatile_cache or 0,
                    drain_rate=drain_rate if volatile_cache else None, flush=flush or "honest",
                    au_bytes=au or 0, page_bytes=page or 0, au_cross=au_cross,
                    page_cross=page_cross, open_aus=open_aus, gc_seconds=gc_seconds, fat_aus=fat_aus,
                    **_wear_settings(wear_cycles, wear_spread, wear_seed, wear_block, wear_mode, wear_readonly_at))
    st = manage.start(spec, ceiling=ceiling)
    if as_json:
        click.echo(json.dumps(st, indent=2))
    else:
        click.echo(st["device"])


@emulate.command("set")
@click.argument("name")
@click.option("--write-rate", callback=params.rate, help="Write rate, e.g. 4.9MB/s.")
@click.option("--read-rate", callback=params.rate, help="Read rate.")
@click.option("--latency", callback=params.seconds_or_zero, help="Added to every request, e.g. 2ms (0 for none).")
@click.option("--cache-size", callback=params.size_or_zero, help="Write cache size (0 for none).")
@click.option("--cache-rate", callback=params.rate, help="Write cache rate.")
@click.option("--cache-idle", callback=params.seconds_or_zero, help="Idle pause that refills the cache.")
@click.option("--ceiling", callback=params.rate_or_off, help="Reader ceiling, or 'none'.")
@click.option("--volatile-cache", callback=params.size_or_zero,
              help="A volatile write cache (RAM): writes are acknowledged once in it and lost if the card is "
                   "pulled before they drain (0 for none).")
@click.option("--drain-rate", callback=params.rate, help="The rate the volatile cache drains at, e.g. 2MB/s.")
@click.option("--flush", type=click.Choice(["honest", "liar"]),
              help="What a flush does with the volatile cache: wait until it is empty, or return at once.")
@click.option("--error", "errors", multiple=True, metavar="START:END[:KIND]", callback=_errors,
              help="Replace the EIO ranges (repeatable).")
@click.option("--clear-errors", is_flag=True, help="Remove all EIO ranges.")
@click.option("--paced/--unpaced", default=None, help="Unpaced: full speed (e.g. while formatting).")
@wear_options
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def set_cmd(name, write_rate, read_rate, latency, cache_size, cache_rate, cache_idle, ceiling, volatile_cache,
            drain_rate, flush, errors, clear_errors, paced, wear_cycles, wear_spread, wear_seed, wear_block,
            wear_mode, wear_readonly_at, as_json):
    """Change settings of a running emulated card."""

    settings: dict = _wear_settings(wear_cycles, wear_spread, wear_seed, wear_block, wear_mode, wear_readonly_at)
    for key, value in (("write_rate", write_rate), ("read_rate", read_rate), ("latency", latency),
                       ("cache_bytes", cache_size), ("cache_rate", cache_rate), ("cache_idle", cache_idle),
                       ("paced", paced), ("volatile_bytes", volatile_cache), ("drain_rate", drain_rate),
                       ("flush", flush)):
        if value is not None:
            settings[key] = value
    if errors and clear_errors:
        raise UsageError("use either --error or --clear-errors")
    if errors or clear_errors:
        settings["errors"] = errors
    if ceiling is not None:
        settings["ceiling"] = ceiling or None      # 0.0: none
    if not settings:
        raise UsageError("nothing to set (see: cardbench emulate set --help)")
    st = manage.set_card(name, **settings)
    if as_json:
        click.echo(json.dumps(st, indent=2))
    else:
        click.echo(render_emulate_status([st]), nl=False)


@emulate.command("wear")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the wear model's truth as JSON.")
def wear_cmd(name, as_json):
    """The wear model of an emulated card: its limits, the worn blocks, read-only or not."""

    w = manage.wear(name)
    if as_json:
        click.echo(json.dumps(w, indent=2))
    else:
        click.echo(render_wear(name, w), nl=False)


@emulate.command("yank")
@click.argument("name")
def yank_cmd(name):
    """Pull the card out: from now on every I/O on it fails with EIO."""

    st = manage.yank(name)
    click.echo(f"{name}: yanked; I/O on {st.get('device')} now fails with EIO")


@emulate.command("pull")
@click.argument("name")
def pull_cmd(name):
    """Pull the card out (or cut its power): its volatile cache loses what it holds, its loop device goes."""

    st = manage.pull(name)
    click.echo(f"{name}: pulled; {st.get('lost_now', 0)} bytes of its volatile cache lost")


@emulate.command("reinsert")
@click.argument("name")
@click.option("--read-only", is_flag=True, help="It comes back write-protected.")
def reinsert_cmd(name, read_only):
    """Put a pulled card back, with what it kept; prints its (new) loop device."""

    click.echo(manage.reinsert(name, read_only=read_only))


@emulate.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_cmd(name, as_json):
    """Settings and counters of one or all emulated cards."""

    entries = manage.status(name)
    if as_json:
        click.echo(json.dumps(entries if name is None else entries[0], indent=2))
        return
    click.echo(render_emulate_status(entries), nl=False)


@emulate.command("stop")
@click.argument("name", required=False)
@click.option("--all", "stop_all", is_flag=True, help="Stop every emulated card.")
def stop_cmd(name, stop_all):
    """Stop an emulated card: unmount, detach the loop device, stop its server, remove its state."""

    if stop_all == (name is not None):
        raise UsageError("give a NAME or --all")
    if stop_all:
        stopped = manage.stop_all()
        click.echo(f"stopped {len(stopped)} emulated card(s)" + (f": {', '.join(stopped)}" if stopped else ""))
    else:
        manage.stop(name)
        click.echo(f"{name}: stopped")
