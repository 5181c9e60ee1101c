"""Named, detached emulated cards for people (what ``cardbench emulate ...`` calls).

A named emulator is one reader (server process) with one card called NAME. Its state lives in
``ROOT/NAME`` (default ROOT ``/run/cardbench/emulate``, or $CARDBENCH_EMULATE_ROOT): config,
``state.json`` (server pid, loop device), ``control.sock``, ``server.log`` and the FUSE mount
``mnt/``. The sparse backing file lives in ``DATA_ROOT/NAME`` (default
``/var/tmp/cardbench-emulate``, or $CARDBENCH_EMULATE_DATA; ROOT itself when ROOT is given),
so big cards do not fill a tmpfs /run. Everything is removed by :func:`stop`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cardbench.emulate import system
from cardbench.emulate.device import STATE_NAME, EmulatedReader
from cardbench.emulate.spec import CardSpec
from cardbench.errors import CardbenchError, UsageError

DEFAULT_ROOT = "/run/cardbench/emulate"
DEFAULT_DATA_ROOT = "/var/tmp/cardbench-emulate"


def root_dir(root: str | os.PathLike | None = None) -> Path:
    return Path(root or os.environ.get("CARDBENCH_EMULATE_ROOT") or DEFAULT_ROOT)


def _data_root(root: str | os.PathLike | None) -> Path:
    if os.environ.get("CARDBENCH_EMULATE_DATA"):
        return Path(os.environ["CARDBENCH_EMULATE_DATA"])
    if root is not None or os.environ.get("CARDBENCH_EMULATE_ROOT"):
        return root_dir(root)
    return Path(DEFAULT_DATA_ROOT)


def names(root: str | os.PathLike | None = None) -> list[str]:
    """Names of the emulators with state under ROOT (running or stale)."""
    base = root_dir(root)
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / STATE_NAME).is_file())


def _workdir(name: str, root: str | os.PathLike | None) -> Path:
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise UsageError(f"not an emulator name: {name!r}")
    return root_dir(root) / name


def open_reader(name: str, root: str | os.PathLike | None = None) -> EmulatedReader:
    """The reader of the named emulator (attached to its running server)."""
    workdir = _workdir(name, root)
    if not (workdir / STATE_NAME).is_file():
        raise UsageError(f"no emulated card named {name!r} (see: cardbench emulate status)")
    return EmulatedReader.attach(workdir)


def start(spec: CardSpec, *, ceiling: float | None = None, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Start a detached emulator for ``spec`` (named ``spec.name``); returns its status
    (with ``device``). A stale emulator of the same name (server gone) is cleaned up first."""
    workdir = _workdir(spec.name, root)
    if (workdir / STATE_NAME).is_file():
        old = EmulatedReader.attach(workdir)
        if old.alive():
            raise UsageError(f"an emulated card named {spec.name!r} is already running "
                             f"({', '.join(old._devices.values()) or 'no device'}); stop it first")
        old.close(raise_on_leftovers=False)
    if workdir.exists() and any(workdir.iterdir()):
        # Leftovers without state: make sure nothing is mounted, then clear.
        system.release_mountpoint(workdir / "mnt")
        system.unmount_fuse(workdir / "mnt")
        system.remove_tree(workdir)
    root_dir(root).mkdir(parents=True, exist_ok=True, mode=0o755)
    data_dir = _data_root(root) / spec.name
    if data_dir.resolve() == workdir.resolve():
        data_dir = workdir / "data"
    reader = EmulatedReader(ceiling, workdir=workdir, data_dir=data_dir, detached=True)
    reader.start()
    try:
        card = reader.add_card(spec)
        reader._extra_state["card"] = spec.to_json()
        reader._save_state()
        st = card.status()
    except BaseException:
        reader.close(raise_on_leftovers=False)
        raise
    st["workdir"] = str(workdir)
    st["pid"] = reader.pid
    return st


def set_card(name: str, root: str | os.PathLike | None = None, **settings: Any) -> dict[str, Any]:
    """Change live settings of the named card (see :meth:`EmulatedCard.set`)."""
    reader = open_reader(name, root)
    ceiling_set = "ceiling" in settings
    ceiling = settings.pop("ceiling", None)
    card = reader.cards.get(name)
    if card is None:
        raise CardbenchError(f"emulator {name!r} has no card (broken state in {reader.workdir})")
    st = card.set(**settings) if settings else card.status()
    if ceiling_set:
        reader.set_ceiling(ceiling)
    st = card.status()
    st["ceiling"] = reader.ceiling
    return st


def wear(name: str, root: str | os.PathLike | None = None, *, full: bool = False) -> dict[str, Any]:
    """The truth of the named card's wear model (see :meth:`EmulatedCard.wear`)."""
    return open_reader(name, root).cards[name].wear(full=full)


def yank(name: str, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """From now on every I/O on the named card fails with EIO."""
    reader = open_reader(name, root)
    st = reader.cards[name].yank()
    st["device"] = reader._devices.get(name)
    return st


def pull(name: str, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """Pull the named card (see :meth:`EmulatedCard.pull`)."""
    return open_reader(name, root).cards[name].pull()


def reinsert(name: str, root: str | os.PathLike | None = None, *, read_only: bool = False) -> str:
    """Put the named card back (see :meth:`EmulatedCard.reinsert`); its loop device."""
    return open_reader(name, root).cards[name].reinsert(read_only=read_only)


def status(name: str | None = None, root: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Status of one or all named emulators. A dead server shows ``running: False``."""
    out = []
    for n in ([name] if name else names(root)):
        reader = open_reader(n, root)
        entry: dict[str, Any] = {"name": n, "workdir": reader.workdir, "pid": reader.pid,
                                 "device": reader._devices.get(n), "running": reader.alive()}
        if entry["running"]:
            st = reader.status()
            entry["ceiling"] = st.get("ceiling")
            entry.update(st.get("cards", {}).get(n, {}))
            entry["device"] = reader._devices.get(n)
        out.append(entry)
    return out


def stop(name: str, root: str | os.PathLike | None = None) -> None:
    """Stop the named emulator: unmount, detach the loop device, stop the server, remove state."""
    reader = open_reader(name, root)
    reader.close()


def stop_all(root: str | os.PathLike | None = None) -> list[str]:
    """Stop every named emulator; returns their names."""
    stopped = []
    errors = []
    for n in names(root):
        try:
            stop(n, root)
            stopped.append(n)
        except CardbenchError as e:
            errors.append(f"{n}: {e.message}")
    if errors:
        raise CardbenchError("; ".join(errors))
    return stopped
