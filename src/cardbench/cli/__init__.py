"""The command line: a thin layer over the library. Each command parses its arguments, calls one
library function, and prints. Errors are one line on stderr with a documented exit code
(README.md, "Exit codes"); a traceback is only shown with CARDBENCH_DEBUG=1.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

import click

from cardbench import __version__
from cardbench.cli import params
from cardbench.cli.ui import error_line, said
from cardbench.devices.preserve import recover_pending
from cardbench.devices.safety import confirm_destructive
from cardbench.engine import engine_names
from cardbench.errors import CardbenchError, ExitCode, Interrupted, UsageError
from cardbench.geometry import GeometryOptions, find_geometry
from cardbench.measured import keep_measured
from cardbench.plan import make_plan
from cardbench.record import check_store
from cardbench.report.answer import render_run
from cardbench.report.geometry import render_geometry
from cardbench.report.plan import plan_document, render_plan
from cardbench.result import Card, Reader
from cardbench.runner import (
    PROFILES,
    DeviceOptions,
    RunOptions,
    run_device,
    run_directory,
)
from cardbench.share import share_options
from cardbench.signals import install_sigterm
from cardbench.target import open_target
from cardbench.units import UnitError
from cardbench.verdicts.labels import parse_label

FORMATS = ["table", "md", "csv", "json"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cardbench")
def cli() -> None:
    """Honest speed, label and capacity tests for flash cards, USB sticks and card readers."""


@cli.command("run", epilog=params.examples(
    "cardbench run /media/card --brand Lexar --capacity 48MB --label 4X",
    "cardbench run /media/card --profile app --verbose   # + random 4 KiB IOPS",
    "cardbench run /dev/sdb --json > sdb.json   # whole device, read-only"))
@click.argument("target", default=".", required=False)
@click.option("--size", callback=params.size, help="Bytes per test file, e.g. 16MB or 64MiB (default: adapt so a run lasts ~3 s).")
@click.option("--runs", type=int, default=3, show_default=True, help="Timed runs per test (after the warm-up runs).")
@click.option("--warmup", type=click.IntRange(0, 100), default=1, show_default=True,
              help="Untimed warm-up runs before them (0: none; a run on a slow card then takes half the time).")
@click.option("--name", help="The card's name, e.g. 'Ultra II'.")
@click.option("--brand", help="The card's brand, e.g. SanDisk.")
@click.option("--capacity", callback=params.size, help="The capacity printed on the card, e.g. 256MB.")
@click.option("--label", help="Speed marks printed on the card, e.g. '4X' or 'C10 U3 V30 A2'.")
@click.option("--reader", "reader_name", help="Name of the card reader (for readers cardbench cannot identify).")
@params.output_options(FORMATS, format_help="table and md end with the card's row and the verdicts; csv: one "
                                           "row per timed run; json: the cardbench.result/1 document.")
@click.option("-v", "--verbose", is_flag=True, help="Also every run, its statistics and the method, before the answer.")
@click.option("--mib", is_flag=True, help="Show rates in MiB/s (2^20 B/s) instead of MB/s (10^6 B/s).")
@params.db_option
@share_options
@click.option("--no-save", is_flag=True, help="Do not store the result.")
@click.option("--positions", type=int, default=16, show_default=True,
              help="Block device: positions sampled over the device by raw_read/raw_write.")
@click.option("--destructive", is_flag=True, help="Block device: also run raw_write (overwrites data!).")
@click.option("--preserve", is_flag=True, help="With --destructive: save each region first and write it back after.")
@click.option("--confirm", "confirm_value", help="With --destructive: the device's serial (or exact size in bytes).")
@click.option("--profile", type=click.Choice(["classic", "app", "matrix"]), default="classic", show_default=True,
              help="Directory: extra tests after seq_write/cold_read: app = 4 KiB random IOPS at QD1 and QD32 "
                   "(added by itself for an A1/A2 label); matrix = CrystalDiskMark's set.")
@click.option("--tests", "test_names", help="Directory: extra tests by name, comma-separated, e.g. rand_read_4k_q32t1.")
@click.option("--engine", type=click.Choice(engine_names()), default=None,
              help="Engine for every test (default: sync for seq_write/cold_read, queued for the extra tests).")
@click.option("--duration", type=float, default=3.0, show_default=True, help="Seconds per run of an extra test.")
@click.option("--sustained", is_flag=True, help="Directory: also sustained_write over the free space (finds the write cache).")
@click.option("--plan", "plan_only", is_flag=True,
              help="Directory: only say what the run would do (each test and the bytes of the file it writes, "
                   "capped by the free space and the filesystem's largest file) and write nothing.")
@click.option("--geometry", "with_geometry", is_flag=True,
              help="Block device: also find its flash geometry, read-only (as `cardbench geometry`), stored beside "
                   "the run.")
def run_cmd(target, size, runs, warmup, name, brand, capacity, label, reader_name, out, verbose, mib, db, no_save,
            positions, destructive, preserve, confirm_value, profile, test_names, engine, duration, sustained,
            plan_only, with_geometry):
    """Test the card at TARGET: a directory on the mounted card (default: the current one) or a
    whole block device.

    A directory gets seq_write (fresh files of incompressible data, timed through fsync, one
    warm-up run apart) and cold_read (O_DIRECT, page cache dropped and checked, content verified).
    A block device gets raw_read (sampled over the whole device) and raw_access (4 KiB random
    reads), read-only; raw_write only with --destructive, on a device that is not mounted, not
    the system and not in use, confirmed by its serial (or exact size).
    """
    card = Card(name=name, brand=brand, capacity_bytes=capacity, label=label)
    reader = Reader(name=reader_name)
    progress = out.progress()
    if label:
        _validate_label(label)
    if not no_save and not plan_only:
        check_store(db)
    target = open_target(target, kinds=("directory", "device"), write=True, whole_device=True)
    is_device = target.kind == "device"
    if plan_only:
        if is_device:
            raise UsageError("--plan is for a directory on the mounted card")
        _show_plan(out, target, RunOptions(size=size, runs=runs, warmup=warmup, label=label, engine=engine,
                                           duration=duration, sustained=sustained,
                                           extra_tests=_extra_tests(profile, test_names)))
        return
    if with_geometry and not is_device:
        raise UsageError("--geometry is for a block device (a card's geometry is timed on the whole device)")
    if not is_device and (destructive or preserve or confirm_value):
        raise UsageError("--destructive, --preserve and --confirm are for block devices; a directory test "
                         "only writes its own files")
    if is_device and destructive:
        confirm_value = confirm_destructive(target.block_device(), confirm_value, will=(
            "raw_write will overwrite parts of it" + (", each saved first and written back after" if preserve
                                                     else "; what it overwrites is lost")))
    if is_device:
        def measure():
            result = run_device(target, DeviceOptions(runs=runs, warmup=warmup, positions=positions,
                                                      destructive=destructive, preserve=preserve,
                                                      confirm=confirm_value, card=card, reader=reader, label=label,
                                                      progress=progress))
            if not with_geometry:
                return result
            try:
                geometry = find_geometry(target, GeometryOptions(progress=progress))
            except KeyboardInterrupt:
                raise Interrupted("interrupted in the geometry pass; the run was kept", partial=result) from None
            except CardbenchError as e:     # the run stands; the geometry could not be found
                out.note(f"geometry: {e.message}")
                geometry = None
            return [result, geometry]
    else:
        def measure():
            return run_directory(target, RunOptions(size=size, runs=runs, warmup=warmup, card=card, reader=reader,
                                                    label=label, progress=progress,
                                                    extra_tests=_extra_tests(profile, test_names), engine=engine,
                                                    duration=duration, sustained=sustained))

    def show(item) -> None:     # after storing: what is printed is what was stored (re-judged)
        result, geometry = _run_and_geometry(item)
        out.echo(render_run(result, out.fmt, "MiB/s" if mib else "MB/s", width=out.width, verbose=verbose),
                 nl=False)
        if geometry is not None and not out.json:
            out.echo("\n" + render_geometry(geometry), nl=False)
    kept = keep_measured(measure, db=db, save=not no_save, show=show)
    rec = kept.recorded
    if rec is None:
        return
    said(rec, saved_line=not (out.json or out.quiet))
    if rec.stored and not verbose and out.fmt in ("table", "md"):
        out.note(f"every run and its statistics: cardbench results --id {_run_and_geometry(kept.item)[0].id[:12]}")


def _run_and_geometry(item) -> tuple:
    """(the run's Result, its geometry document or None) from what `run` measured."""
    if isinstance(item, list):
        return item[0], (item[1] if len(item) > 1 else None)
    return item, None


def _extra_tests(profile: str, test_names: str | None) -> list[str]:
    return list(PROFILES[profile]) + [t.strip() for t in (test_names or "").split(",") if t.strip()]


def _show_plan(out, target, opts) -> None:
    """`run --plan`: the plan (cardbench.plan.make_plan) on the target as it is now, nothing written."""
    opts.validate()
    doc = plan_document(target, make_plan(target, opts), opts)
    if out.json:
        out.echo(json.dumps(doc, indent=2))
    else:
        out.echo(render_plan(doc))


def _validate_label(label: str) -> None:
    parse_label(label)


@cli.command("recover", epilog=params.examples("cardbench recover"))
def recover_cmd():
    """Restore regions saved by a --preserve run that was killed (also done at every start)."""
    reports = recover_pending()
    if not reports:
        click.echo("nothing to recover")
    for r in reports:
        click.echo(f"{r.device or r.journal}: {r.status}: {r.message}")


#: command modules that failed to import: (module, the error); :func:`main` refuses to start with one
_BROKEN: list[tuple[str, BaseException]] = []


def _attach(module: str, attr: str) -> None:
    """Add a command group's command to ``cli``. A module that fails to import is kept in
    :data:`_BROKEN`, and :func:`main` ends on it as an internal error (exit 70) naming the module:
    a broken command never silently vanishes from ``--help``."""
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        _BROKEN.append((module, e))
        return
    cmd = getattr(mod, attr, None)
    if cmd is None:
        _BROKEN.append((module, AttributeError(f"it has no command {attr!r}")))
        return
    cli.add_command(cmd)


_COMMANDS = [
    ("cardbench.cli.results_cmd", "results"),
    ("cardbench.cli.results_cmd", "compare"),
    ("cardbench.cli.results_cmd", "report"),
    ("cardbench.cli.results_cmd", "import_cmd"),
    ("cardbench.cli.results_cmd", "export"),
    ("cardbench.cli.list_cmd", "list_cmd"),
    ("cardbench.cli.identify_cmd", "identify_cmd"),
    ("cardbench.cli.emulate_cmd", "emulate"),
    ("cardbench.cli.readers_cmd", "readers"),
    ("cardbench.cli.demo_cmd", "demo"),
    ("cardbench.cli.verify_cmd", "verify"),
    ("cardbench.cli.pulltest_cmd", "pulltest"),
    ("cardbench.cli.endure_cmd", "endure"),
    ("cardbench.cli.sync_cmd", "sync"),
    ("cardbench.cli.drawer_cmd", "drawer"),
    ("cardbench.cli.serve_cmd", "serve"),
    ("cardbench.cli.share_cmd", "share"),
    ("cardbench.cli.geometry_cmd", "geometry"),
]
for _module, _attr in _COMMANDS:
    _attach(_module, _attr)


def _check_commands() -> None:
    """Raise (an internal error, exit 70) when a command module could not be imported."""
    if _BROKEN:
        module, e = _BROKEN[0]
        raise RuntimeError(f"the command module {module} cannot be imported ({type(e).__name__}: {e})")


# click >= 8.2 raises this (a UsageError) for a group called without arguments: show the help
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _recover_at_start(argv: list[str] | None) -> None:
    """Every invocation first restores what a killed --preserve run left in its journal."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("recover", "--help", "-h", "--version"):
        return
    for report in recover_pending():
        if getattr(report, "status", None) in ("restored", "failed"):
            error_line(f"recovered: {report.device or report.journal}: {report.status}: {report.message}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `cardbench` console script and `python -m cardbench`."""
    install_sigterm()
    debug = os.environ.get("CARDBENCH_DEBUG") == "1"
    try:
        # a shell cannot pass a NUL (execve's strings end at one), but main(argv) can: no path,
        # name or value may hold one, and os calls would fail on it deep inside a command
        bad = next((a for a in (sys.argv[1:] if argv is None else argv) if "\x00" in str(a)), None)
        if bad is not None:
            raise UsageError(f"an argument contains a NUL byte: {bad!r}")
        _check_commands()
        _recover_at_start(argv)
        cli.main(args=argv, prog_name="cardbench", standalone_mode=False)
    except _NO_ARGS_IS_HELP as e:
        e.show()
        sys.exit(ExitCode.OK)
    except click.ClickException as e:
        error_line(e.format_message().replace("\n", " "))
        sys.exit(ExitCode.USAGE)
    except click.exceptions.Abort:
        error_line("aborted")
        sys.exit(ExitCode.INTERRUPTED)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except CardbenchError as e:
        if e.recorded is not None:      # what the measurement it ended kept (cardbench.measured)
            said(e.recorded, saved_line=False, end=False)
        if debug:
            raise
        error_line(e.message)
        sys.exit(e.exit_code)
    except UnitError as e:
        error_line(str(e))
        sys.exit(ExitCode.USAGE)
    except KeyboardInterrupt:
        error_line("interrupted; cleanup has run")
        sys.exit(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        sys.exit(ExitCode.FAILURE)
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a traceback
        if debug:
            raise
        error_line(f"internal error: {type(e).__name__}: {e} (CARDBENCH_DEBUG=1 shows the traceback)")
        sys.exit(ExitCode.INTERNAL)
