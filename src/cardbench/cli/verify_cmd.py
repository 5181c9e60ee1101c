"""`cardbench verify`: is it genuine? (cardbench.verify).

A block device gets the quick probe (seconds; non-destructive unless --destructive) or, with
--full --destructive, a fill of the whole device. A directory on a mounted card gets full mode:
its free space is filled with files and every sector is checked (resumable with --resume).
"""

from __future__ import annotations

from cardbench.cli.ui import stdout_console

import json
import os
import stat
import sys

import click

from cardbench.errors import CardbenchError, Interrupted, SafetyRefusal, UsageError
from cardbench.cli import params
from cardbench.cli.ui import said
from cardbench.record import check_store, record
from cardbench.units import fmt_rate, fmt_seconds, fmt_size


@click.command("verify")
@click.argument("target")
@click.option("--full", is_flag=True, help="Fill and check everything (H2testw / f3write+f3read) instead of the "
                                           "quick probe. Needs --destructive on a block device.")
@click.option("--destructive", is_flag=True, help="Do not save and restore what the test overwrites (faster; "
                                                  "destroys the card's data). Asks for confirmation.")
@click.option("--confirm", "confirm_value", metavar="VALUE",
              help="The device's serial (or exact size in bytes if it has none), to allow --destructive "
                   "without a prompt. See `cardbench list`.")
@click.option("--time-budget", callback=params.seconds, metavar="SECONDS",
              help="Quick mode: aim to finish within this time (fewer samples; the result says the confidence).")
@click.option("--resume", is_flag=True, help="Full mode: continue an interrupted run.")
@click.option("--keep-files", is_flag=True, help="Full mode on a directory: leave the test files.")
@click.option("--file-size", callback=params.size, metavar="SIZE", help="Full mode: bytes per file (default 1 GiB, "
                                                                  "smaller on small cards).")
@click.option("--journal", "journal_dir", metavar="DIR",
              help="Where the non-destructive quick mode keeps the bytes it overwrites (another disk; "
                   "default: the user data dir).")
@click.option("--assume-cache", callback=params.size, metavar="SIZE",
              help="Quick mode: the largest cache a fake card may hide data in (default: size/64, 8-256 MiB).")
@click.option("--seed", type=int, help="Make the run reproducible (data, positions, order).")
@click.option("--json", "as_json", is_flag=True, help="Print the cardbench.verify/1 document.")
@click.option("--mib", is_flag=True, help="Rates in MiB/s and sizes in MiB instead of MB/s and MB.")
@params.db_option
@click.option("--no-save", is_flag=True, help="Do not store the result.")
def verify(target, full, destructive, confirm_value, time_budget, resume, keep_files, file_size, journal_dir,
           assume_cache, seed, as_json, mib, db, no_save):
    """Is the card genuine? Find its real capacity.

    TARGET is a whole block device (/dev/sdX, /dev/mmcblkN: quick probe, or --full --destructive)
    or a directory on the mounted card (full mode: fills its free space with files).
    """
    from cardbench.cli.ui import RichProgress
    try:
        st = os.stat(target)
    except FileNotFoundError:
        raise _target_error(f"{target}: no such file, directory or device") from None
    except OSError as e:
        raise _target_error(f"{target}: {e.strerror}") from None
    is_dir = stat.S_ISDIR(st.st_mode)
    if not is_dir and not stat.S_ISBLK(st.st_mode):
        raise UsageError(f"{target} is neither a block device nor a directory")
    if is_dir and destructive:
        raise UsageError("--destructive is for block devices; full mode on a directory only uses free space")
    if time_budget is not None and (full or is_dir):
        raise UsageError("--time-budget is for the quick probe; full mode always checks everything")
    if resume and not (full or is_dir):
        raise UsageError("--resume is for full mode (--full)")
    if not is_dir and full and not destructive:
        raise UsageError(f"full mode on the block device {target} overwrites all of it: add --destructive "
                         "(you will be asked to confirm), or give a directory on the mounted card")
    if not no_save:
        check_store(db)
    if not is_dir and destructive:
        _confirm(target, confirm_value, as_json)
    progress = RichProgress(enabled=None if not as_json else False)
    try:
        if is_dir or full:
            from cardbench.verify.full import verify_full
            if is_dir and not full and not as_json:
                click.echo("A directory: full mode (fills its free space and checks every sector).", err=True)
            doc = verify_full(target, destructive=destructive, resume=resume, keep_files=keep_files,
                              file_bytes=file_size, progress=progress, seed=seed, check_safety=True)
        else:
            from cardbench.verify.quick import verify_device
            doc = verify_device(target, destructive=destructive, journal_dir=journal_dir, time_budget=time_budget,
                                progress=progress, seed=seed, assume_cache_bytes=assume_cache)
    except (Interrupted, KeyboardInterrupt) as e:
        partial = e.doc if isinstance(e, Interrupted) else None
        if partial is not None and not no_save:
            said(record(partial, db), saved_line=False, end=False)
        if isinstance(e, KeyboardInterrupt):
            raise Interrupted("interrupted; cleanup has run") from None
        raise
    # the check is over: a Ctrl-C or SIGTERM from here on waits until the result is stored and
    # shown, then ends the command (exit 130) without losing the result
    from cardbench.signals import signals_held
    failed = not doc.get("complete")

    def show() -> None:
        if as_json:
            click.echo(json.dumps(doc, indent=2))
        else:
            render(doc, mib=mib)

    with signals_held() as sigs:
        rec = None if no_save else record(doc, db, show=show)
        if no_save:
            show()
    if rec is not None and (failed or sigs):
        said(rec, saved_line=False, end=False)    # then the error that ends the command
    if sigs:
        raise Interrupted("interrupted after the check had finished; its result was "
                          + ("saved" if rec and rec.stored else "kept in the outbox" if rec and rec.kept
                             else "shown above"))
    if failed:
        # the check stopped early (card removed, I/O errors, restore failed): stored as incomplete,
        # and said in one line with the exit code of a card that failed during the test
        from cardbench.errors import DeviceFault
        raise DeviceFault(" ".join(str(doc.get("error") or "the check stopped before the end (see the "
                                       "table above); stored as incomplete").split()))
    if rec is not None:
        said(rec, saved_line=not as_json)


def _target_error(msg: str) -> CardbenchError:
    from cardbench.errors import TargetError
    return TargetError(msg)


def _confirm(path: str, value: str | None, quiet: bool) -> None:
    """Destructive mode: the safety rules now, then the identity typed by the user (or --confirm)."""
    from cardbench.devices.safety import check_destructive, confirm, identity_kind
    dev = check_destructive(path)
    if value is None:
        if not sys.stdin.isatty():
            raise SafetyRefusal(f"not confirmed: pass --confirm with the {identity_kind(dev)} of {path} "
                                "(see `cardbench list`) to allow destroying its data")
        what = " ".join(x for x in (dev.vendor, dev.model) if x) or "device"
        click.echo(f"{path}: {what}, {fmt_size(dev.size)} ({dev.size} bytes). EVERYTHING ON IT WILL BE "
                   "DESTROYED.", err=True)
        value = click.prompt(f"Type its {identity_kind(dev)} to go on", default="", show_default=False,
                             err=True)
    confirm(dev, value)


# -- the table ------------------------------------------------------------------------------------------


def _sz(n, mib: bool) -> str:
    if n is None:
        return "unknown"
    return f"{fmt_size(n, binary=mib)} ({n:,} bytes)"


def render(doc: dict, *, mib: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table
    console = stdout_console()
    verdict = doc.get("verdict") or "unknown"
    colour = {"genuine": "green", "counterfeit": "red", "damaged": "yellow"}.get(verdict, "white")
    unit = "MiB/s" if mib else "MB/s"
    title = "cardbench verify (" + ("quick probe" if doc.get("mode") == "quick" else "full check") + ")"
    t = Table(title=title, show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row("target", str(doc.get("device") or (doc.get("target") or {}).get("path")))
    card = doc.get("card") or {}
    if card.get("serial") or card.get("model"):
        t.add_row("card", " ".join(str(x) for x in (card.get("brand"), card.get("model"), card.get("serial")) if x))
    reader = doc.get("reader") or {}
    if reader.get("vendor_id"):
        t.add_row("reader", f"{reader.get('name') or ''} {reader.get('vendor_id')}:{reader.get('product_id')}")
    t.add_row("verdict", f"[bold {colour}]{verdict.upper()}[/]" + (f" ({doc['kind']})" if doc.get("kind") else ""))
    t.add_row("announced", _sz(doc.get("announced_bytes"), mib))
    t.add_row("usable", _sz(doc.get("usable_bytes"), mib) +
              (f"  [dim]{doc['usable_basis']}[/]" if doc.get("usable_basis") and verdict != "genuine" else ""))
    if doc.get("bad_ranges"):
        rs = doc["bad_ranges"]
        shown = ", ".join(f"[{s:,}, {e:,})" for s, e in rs[:4]) + (f" and {len(rs) - 4} more" if len(rs) > 4 else "")
        space = doc.get("bad_ranges_space")
        t.add_row("bad ranges", shown + (" (positions in the fill, not on the card)" if space == "fill" else ""))
    fix = doc.get("fix") or {}
    if doc.get("fix_command"):
        t.add_row("fix", f"{doc['fix_command']}  [dim]({fix.get('tool')}: {fix.get('note', '')})[/]")
    elif fix.get("note") and verdict != "genuine":
        t.add_row("fix", fix["note"])
    if doc.get("mode") == "quick":
        m = doc.get("method") or {}
        conf = doc.get("confidence") or {}
        t.add_row("method", f"{m.get('positions_sampled')} positions, {m.get('sample_bytes')} B blocks, "
                            f"cache flush {fmt_size(m.get('cache_flush_bytes'), binary=mib)}, "
                            f"{fmt_size(m.get('bytes_written'), binary=mib)} written"
                            + ("" if m.get("preserved") else " (destructive)"))
        if conf.get("statement"):
            t.add_row("confidence", conf["statement"])
        cache = doc.get("cache") or {}
        if cache.get("note"):
            t.add_row("card cache", cache["note"])
        pres = doc.get("preserve") or {}
        if pres.get("status") in ("restored", "kept"):
            t.add_row("preserved", pres.get("message", ""))
    else:
        t.add_row("checked", f"{fmt_size(doc.get('written_bytes'), binary=mib)} written, "
                             f"{fmt_size(doc.get('ok_bytes'), binary=mib)} read back right, "
                             f"{fmt_size(doc.get('lost_bytes'), binary=mib)} lost")
        sec = doc.get("sectors") or {}
        bad = {k: v for k, v in sec.items() if k != "ok" and v}
        if bad:
            t.add_row("bad sectors", ", ".join(f"{k} {v:,}" for k, v in bad.items()))
        tim = doc.get("timings") or {}
        t.add_row("rates", f"write {fmt_rate(tim.get('write_bytes_per_s'), unit)}, "
                           f"read {fmt_rate(tim.get('read_bytes_per_s'), unit)} (average over the card)")
    tim = doc.get("timings") or {}
    t.add_row("time", fmt_seconds(tim.get("seconds")))
    if doc.get("error"):
        t.add_row("error", f"[yellow]{doc['error']}[/]")
    for n in (doc.get("notes") or [])[:4]:
        t.add_row("note", n)
    console.print(t)
    files = doc.get("files") or []
    if doc.get("mode") == "full" and files:
        ft = Table(title="speed over the card (per file / segment)")
        for col in ("#", "bytes", f"write {unit}", f"read {unit}", "ok", "note"):
            ft.add_column(col, justify="right" if col not in ("note",) else "left")
        step = max(1, len(files) // 32)
        for f in files[::step]:
            ok = f.get("ok_bytes") or 0
            ft.add_row(str(f["index"]), fmt_size(f["bytes"], binary=mib),
                       fmt_rate(f.get("write_bytes_per_s"), unit).split()[0],
                       fmt_rate(f.get("read_bytes_per_s"), unit).split()[0],
                       f"{100 * ok / f['bytes']:.0f}%" if f["bytes"] else "-", f.get("error") or "")
        console.print(ft)
