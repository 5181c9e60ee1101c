"""Is it genuine? Fake-capacity verification of cards and sticks.

* :func:`verify_device` (:mod:`cardbench.verify.quick`): quick mode on a block device -- a sampling
  probe (:mod:`cardbench.verify.probe`) that finds the usable capacity in seconds, non-destructive
  by default (every overwritten byte journaled and put back).
* :func:`verify_full` (:mod:`cardbench.verify.full`): full mode -- fill the free space of a mounted
  filesystem (or a whole device, destructively) and check every 512-byte sector, H2testw /
  f3write + f3read style, resumable.

* :func:`verify_target`: either, as the options (:class:`~cardbench.verify.options.VerifyOptions`)
  choose for a target.

Each returns a ``cardbench.verify/1`` document (:mod:`cardbench.verify.doc`).
"""

from __future__ import annotations

from typing import Any

from cardbench.target import Target
from cardbench.verify.doc import SCHEMA
from cardbench.verify.full import verify_full
from cardbench.verify.options import VerifyOptions
from cardbench.verify.quick import verify_device

__all__ = ["SCHEMA", "VerifyOptions", "verify_device", "verify_full", "verify_target"]


def verify_target(target: Target, options: VerifyOptions, *, progress=None, check_safety: bool = True) -> dict[str, Any]:
    """Verify ``target`` (a target from :func:`cardbench.target.open_target`: a block
    device gets the quick probe, or with ``full`` a destructive fill; a directory full mode) after
    :meth:`VerifyOptions.validate`; a ``cardbench.verify/1`` document. A destructive test must
    have been confirmed by the caller (``cardbench verify`` asks)."""
    o = options
    if o.validate(target) == "full":
        return verify_full(target, destructive=o.destructive, resume=o.resume, keep_files=o.keep_files,
                           file_bytes=o.file_bytes, progress=progress, seed=o.seed, check_safety=check_safety)
    return verify_device(target, destructive=o.destructive, journal_dir=o.journal_dir, time_budget=o.time_budget,
                         progress=progress, seed=o.seed, assume_cache_bytes=o.assume_cache_bytes,
                         check_safety=check_safety)

