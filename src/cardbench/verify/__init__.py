"""Is it genuine? Fake-capacity verification of cards and sticks.

* :func:`verify_device` (:mod:`cardbench.verify.quick`): quick mode on a block device -- a sampling
  probe that finds the usable capacity in seconds, non-destructive by default.
* :func:`verify_full` (:mod:`cardbench.verify.full`): full mode -- fill the free space of a mounted
  filesystem (or a whole device, destructively) and check every 512-byte sector, H2testw / f3write +
  f3read style, resumable.

Both return a ``cardbench.verify/1`` document (:mod:`cardbench.verify.doc`).
"""

from cardbench.verify.doc import SCHEMA


def verify_device(*args, **kwargs):
    from cardbench.verify.quick import verify_device as _impl
    return _impl(*args, **kwargs)


def verify_full(*args, **kwargs):
    from cardbench.verify.full import verify_full as _impl
    return _impl(*args, **kwargs)


verify_device.__doc__ = "Quick mode on a block device; see cardbench.verify.quick.verify_device."
verify_full.__doc__ = "Full mode; see cardbench.verify.full.verify_full."

__all__ = ["SCHEMA", "verify_device", "verify_full"]
