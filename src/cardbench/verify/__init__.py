"""Is it genuine? Fake-capacity verification of cards and sticks.

* :func:`verify_device` (:mod:`cardbench.verify.quick`): quick mode on a block device -- a sampling
  probe (:mod:`cardbench.verify.probe`) that finds the usable capacity in seconds, non-destructive
  by default (every overwritten byte journaled and put back).
* :func:`verify_full` (:mod:`cardbench.verify.full`): full mode -- fill the free space of a mounted
  filesystem (or a whole device, destructively) and check every 512-byte sector, H2testw /
  f3write + f3read style, resumable.

Both return a ``cardbench.verify/1`` document (:mod:`cardbench.verify.doc`).
"""

from cardbench.verify.doc import SCHEMA
from cardbench.verify.full import verify_full
from cardbench.verify.quick import verify_device

__all__ = ["SCHEMA", "verify_device", "verify_full"]
