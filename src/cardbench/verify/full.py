"""Full mode: fill the card and check every 512-byte sector (H2testw, f3write + f3read).

On a mounted filesystem (a directory): the free space is filled with files
``cardbench-verify-0001.cbv``, ``-0002`` ... of ``file_bytes`` each (1 GiB, or 1/16 of the free
space on small cards), written with O_DIRECT and fdatasync'ed one by one (the time of each is its
write rate); then every file is read back with O_DIRECT, page cache dropped, and every sector
judged (:mod:`cardbench.patterns`): ok, overwritten (the data of another position of the fill:
the card wrapped around), changed (damaged), or lost (zeros, old data). The data of file k at
byte x belongs at fill position ``k * file_bytes + x``, so an overwritten sector names where it
was written. Where the filesystem answers FIEMAP, fill positions are mapped to bytes of the card,
so the report names the real capacity on the device and the f3fix line, as quick mode does.

On a block device (destructive only): the same over the whole device, in segments.

Resumable: a small state file beside the files (``cardbench-verify.json``; for a block device in
the user state dir) records the run's tag and what was written and checked; ``resume=True``
continues an interrupted run (the file being written when it stopped is written again). The files
are removed at the end unless ``keep_files``; after an interruption they stay for ``--resume``.
"""

import os
from typing import Any

from cardbench.target import Target
from cardbench.verify.full_run import CHUNK, FillRun
from cardbench.verify.full_sources import DeviceRun, DirRun
from cardbench.verify.full_state import FILE_RE, STATE_NAME, default_file_bytes
from cardbench.verify.options import VerifyOptions, target_kind

__all__ = ["CHUNK", "FILE_RE", "STATE_NAME", "DeviceRun", "DirRun", "FillRun", "default_file_bytes", "verify_full"]


def verify_full(target: Target, *, destructive: bool = False, resume: bool = False, keep_files: bool = False,
                file_bytes: int | None = None, progress=None, seed: int | None = None,
                check_safety: bool = True, max_bytes: int | None = None,
                state_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Fill and check a mounted filesystem (``target`` a directory) or a whole block device
    (``destructive=True`` required); ``target`` from :func:`cardbench.target.open_target`. Returns a ``cardbench.verify/1`` document (mode "full").

    ``resume``: continue the interrupted run found at ``target``. ``keep_files``: leave the
    files (directory mode). ``state_dir``: where the state is kept (a block device) or mirrored
    (a directory; the state file proper sits beside the files); default the user state dir. ``file_bytes``: bytes per file/segment (default: see
    ``default_file_bytes``). ``max_bytes``: fill at most this much (a partial test, like
    H2testw's "only N MB"). The options are checked by
    :class:`~cardbench.verify.options.VerifyOptions` (a missing target: TargetError; a block
    device without ``destructive``: UsageError). Ctrl-C raises ``Interrupted`` (``.doc`` is the
    partial document; the files and state stay for ``resume``).
    """
    VerifyOptions(full=True, destructive=destructive, resume=resume, keep_files=keep_files,
                  file_bytes=file_bytes).check(target_kind(target), target.path)
    if target.is_directory:
        run = DirRun(target, progress=progress, seed=seed, file_bytes=file_bytes, resume=resume,
                      keep_files=keep_files, max_bytes=max_bytes, state_dir=state_dir)
    else:
        run = DeviceRun(target, progress=progress, seed=seed, file_bytes=file_bytes, resume=resume,
                         check_safety=check_safety, max_bytes=max_bytes, state_dir=state_dir)
    return run.run()
