"""Quick mode: probe a block device for fake capacity in seconds (see :mod:`cardbench.verify.probe`).

``verify_device(path)`` checks the safety rules (not mounted, not the system, not in use,
writable), takes the target lock and an exclusive open, and runs the probe. Non-destructive by
default: every region is first copied into the preserve journal (on another filesystem,
:mod:`cardbench.devices.preserve`) and everything is written back at the end -- in reverse order
of saving, which is what makes it right on a wraparound card, where a write past the real size
lands on data saved earlier -- also on I/O errors, Ctrl-C and SIGTERM. If the card is pulled out
the journal stays and ``recover_pending`` (run at the start of the next verify) puts it back.

Faults of the card (I/O errors, removal) are results, not exceptions: the document says
``damaged`` / ``complete: false`` and why. Exceptions are for what stops us from starting
(SafetyRefusal, TargetError, UsageError) and for Ctrl-C (``Interrupted``, with ``.doc`` set to
the partial document after the card was restored).
"""

from __future__ import annotations

import os
import time
from typing import Any

from cardbench.devices.lock import target_lock
from cardbench.devices.preserve import Preserver, recover_pending, restore_held
from cardbench.devices.safety import check_destructive, open_exclusive
from cardbench.engine.data import geometry
from cardbench.engine.errors import GONE_WORDS
from cardbench.errors import CardbenchError, Interrupted, TargetError
from cardbench.progress import NullProgress
from cardbench.target import GONE_WAIT
from cardbench.verify.doc import fix_for, identity, new_doc, now_iso
from cardbench.verify.io import DeviceIO
from cardbench.verify.options import VerifyOptions
from cardbench.verify.probe import MIN_DEVICE, ProbeOptions, Prober


def verify_device(target, *, destructive: bool = False, journal_dir: str | os.PathLike | None = None,
                  time_budget: float | None = None, progress=None, seed: int | None = None,
                  assume_cache_bytes: int | None = None, check_safety: bool = True) -> dict[str, Any]:
    """Probe the block device ``target`` (a device target from
    :func:`cardbench.target.open_target`) for fake capacity; returns a
    ``cardbench.verify/1`` document.

    ``destructive=True`` skips saving and restoring (the caller -- the CLI -- must have had the
    user confirm). ``journal_dir``: root of the preserve journal (default: the user data dir).
    ``time_budget``: seconds to aim for (fewer samples; the document's ``confidence`` says what
    that costs). ``seed`` makes the run reproducible (tag, positions, order).
    ``assume_cache_bytes``: the largest cache a card is assumed to hide data in when it cannot
    be measured (default: size/64 clamped to 8..256 MiB).
    """
    # the options first (they need no look at the system), then the target, opened once
    VerifyOptions(destructive=destructive, time_budget=time_budget).check("device", target.path)
    path = target.path
    progress = progress or NullProgress()
    doc = new_doc("quick")
    doc["device"] = path
    t_start = time.monotonic()
    dev = None
    recovered = []
    if not destructive:
        try:
            recovered = [r.to_dict() for r in recover_pending(journal_dir)]
        except CardbenchError as e:
            recovered = [{"status": "failed", "message": e.message}]
    try:
        dev = target.block_device()
    except CardbenchError:
        if check_safety:
            raise
        dev = None
    if check_safety:
        dev = check_destructive(dev)     # the state read again, now, and the identity compared
    card, reader = identity(dev)
    doc["card"] = card.to_dict() if card else None
    doc["reader"] = reader.to_dict() if reader else None
    if recovered:
        doc["recovered_journals"] = recovered

    with target_lock(target.lock_key, label=path), open_exclusive(path, write=True) as fd:
        sector, size = geometry(fd)
        doc["announced_bytes"] = size
        if size < MIN_DEVICE:
            raise TargetError(f"{path} is too small to verify ({size} bytes; quick mode needs at least "
                              f"{MIN_DEVICE // (1 << 20)} MiB)")
        io = DeviceIO(fd, path, size, sector)
        saver = None
        interrupted: BaseException | None = None
        result = None
        restore: dict[str, Any] = {}
        try:
            prober = Prober(io, saver=None, progress=progress,
                            options=ProbeOptions(time_budget=time_budget, seed=seed,
                                                 assume_cache_bytes=assume_cache_bytes),
                            gone=lambda err: target.gone(err, wait=GONE_WAIT))
            if not destructive:
                saver = prober.saver = Preserver(target.block_device(), journal_dir)
            try:
                result = prober.run()
            except (KeyboardInterrupt, Interrupted) as e:
                interrupted = e
        finally:
            restore = _restore(saver, progress, target) if saver is not None or destructive else restore
            io.close()
        doc["preserve"] = restore
        _fill(doc, path, size, prober, result, restore, t_start)
        if interrupted is not None or restore.get("signals"):
            doc["complete"] = False
            doc["error"] = doc["error"] or "interrupted; " + ("the card was restored" if restore["status"] in
                                                              ("restored", "not used") else restore["message"])
            raise Interrupted(f"interrupted; {restore['message']}", partial=doc)
    return doc


def _restore(saver, progress, target=None) -> dict[str, Any]:
    """Put every saved byte back (signals held meanwhile: devices.preserve.restore_held); never
    raises. A device that went away (``target.gone()``) is not written to: the journal keeps the
    bytes and the record says so in the same words as the error."""
    if saver is None:
        return {"status": "not used", "message": "destructive mode: nothing was saved",
                "saved_bytes": 0, "restored_bytes": 0, "seconds": 0.0}
    saved = saver.saved_bytes
    done = restore_held(saver, progress, "verify: restoring saved bytes",
                        gone=target.gone if target is not None else None)
    if done.kept is None:
        out = {"status": "restored", "message": f"restored {done.restored_bytes} bytes", "saved_bytes": saved,
               "restored_bytes": done.restored_bytes}
    else:
        out = {"status": "kept", "message": done.kept, "saved_bytes": saved, "restored_bytes": 0,
               "journal": done.journal}
    out["seconds"] = done.seconds
    if done.signals:
        out["signals"] = done.signals
    return out


def _fill(doc: dict, path: str, size: int, prober: Prober, r, restore: dict, t_start: float) -> None:
    st = prober.io.stats
    doc["finished_at"] = now_iso()
    doc["timings"] = {
        "seconds": time.monotonic() - t_start,
        "probe_seconds": r.seconds if r else None,
        "write_seconds": st.write_seconds,
        "read_seconds": st.read_seconds,
        "sync_seconds": st.sync_seconds,
        "save_seconds": prober.save_seconds,
        "restore_seconds": restore.get("seconds", 0.0),
    }
    if r is None:
        doc["method"] = {"algorithm": "cardbench quick probe", "seed": prober.opt.seed}
        doc["complete"] = False
        return
    doc.update({
        "verdict": r.verdict,
        "announced_bytes": size,
        "usable_bytes": r.usable_bytes,
        "kind": r.kind,
        "bad_ranges": [list(x) for x in r.bad_ranges],
        "method": r.method,
        "complete": r.complete and restore["status"] != "kept",
        "error": r.error,
        "confidence": r.confidence,
        "cache": {"bytes": r.cache_bytes, "note": r.cache_note},
        "evidence": r.evidence,
        "notes": list(r.notes),
    })
    if r.wrap_bytes:
        doc["wrap_bytes"] = r.wrap_bytes
    if r.removed_at is not None:
        doc["removed_at"] = r.removed_at
        if prober.went_away:     # no verdict: the target's rule says the device itself went away
            doc["error"] = f"{path}: {GONE_WORDS} at byte {r.removed_at}"
        else:
            doc["error"] = f"the card stopped answering (removed?) at byte {r.removed_at}: {r.error}"
    if restore["status"] == "kept":
        kept = restore["message"].replace(f" ({GONE_WORDS})", "") if prober.went_away else restore["message"]
        doc["error"] = (doc["error"] + "; " if doc["error"] else "") + kept
    fix = fix_for(path, size, r.usable_bytes) if r.verdict not in ("genuine", None) else None
    doc["fix"] = fix
    doc["fix_command"] = fix["command"] if fix else None
