"""What every test session (``run`` on a directory, ``run`` on a device) does when it stops: mark
what is short of its runs incomplete, attach the partial result to the error that ends it, and
judge what was measured (plausibility, path ceilings, label verdicts)."""

from __future__ import annotations

import random

from cardbench.engine.errors import GONE_WORDS, describe
from cardbench.errors import CardbenchError, DeviceFault
from cardbench.result import Result, now_iso
from cardbench.target import GONE_WAIT
from cardbench.verdicts.check import check_result


def new_tag() -> int:
    """A fresh run tag for test data (odd, 63 bits: cardbench.patterns)."""
    return random.getrandbits(63) | 1


def mark_incomplete(result: Result, runs: int) -> None:
    """A run that stopped: the result and every test short of its timed runs are incomplete."""
    result.complete = False
    for t in result.tests:
        if len(t.runs) < runs:   # also a test stopped in its warm-up (no timed run yet)
            t.complete = False


def fail(result: Result, err: BaseException, cause: BaseException, target=None):
    """Attach the partial result to the error that ends the run (the CLI stores it as incomplete)
    and raise it. A fault of the card's bytes on a ``target`` that went away (the one rule,
    :meth:`cardbench.target.Target.gone`) is worded as such: "the device is gone (removed?)",
    not the EIO or short read its last request met."""
    if target is not None and isinstance(err, DeviceFault):
        say_gone(err, target)
    result.error = err.message if isinstance(err, CardbenchError) else f"{type(err).__name__}: {err}"
    result.finished_at = now_iso()
    if isinstance(err, CardbenchError):
        err.partial = result
    if err is cause:
        raise cause
    raise err from None


def say_gone(err: DeviceFault, target) -> None:
    """Word ``err`` "the device is gone (removed?)" where ``target`` went away (Target.gone)."""
    code = getattr(err, "errno", None)
    words = describe(code) if code is not None else "the device ended early"
    if GONE_WORDS not in err.message and words in err.message and target.gone(code, wait=GONE_WAIT):
        err.message = err.message.replace(words, GONE_WORDS, 1)


def judge(result: Result) -> None:
    """Plausibility, path ceilings and label verdicts (cardbench.verdicts)."""
    check_result(result, ssr=result.target.get("ssr_classes"))
