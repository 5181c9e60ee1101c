"""What every test session (``run`` on a directory, ``run`` on a device) does when it stops: mark
what is short of its runs incomplete, attach the partial result to the error that ends it, and
judge what was measured (plausibility, path ceilings, label verdicts)."""

from __future__ import annotations

import random

from cardbench.errors import CardbenchError
from cardbench.result import Result, now_iso


def new_tag() -> int:
    """A fresh run tag for test data (odd, 63 bits: cardbench.patterns)."""
    return random.getrandbits(63) | 1


def mark_incomplete(result: Result, runs: int) -> None:
    """A run that stopped: the result and every test short of its timed runs are incomplete."""
    result.complete = False
    for t in result.tests:
        if len(t.runs) < runs:   # also a test stopped in its warm-up (no timed run yet)
            t.complete = False


def fail(result: Result, err: BaseException, cause: BaseException):
    """Attach the partial result to the error that ends the run (the CLI stores it as incomplete)
    and raise it."""
    result.error = err.message if isinstance(err, CardbenchError) else f"{type(err).__name__}: {err}"
    result.finished_at = now_iso()
    if isinstance(err, CardbenchError):
        err.partial = result
    if err is cause:
        raise cause
    raise err from None


def judge(result: Result) -> None:
    """Plausibility, path ceilings and label verdicts (cardbench.verdicts)."""
    from cardbench.verdicts import check_result
    check_result(result, ssr=result.target.get("ssr_classes"))
