"""Builders for Result objects used by the verdicts tests (no I/O)."""

from __future__ import annotations

from cardbench.result import Card, Reader, Result, Run, TestResult


def runs_at(rates: list[float], seconds: float = 2.0, io_size: int | None = None) -> list[Run]:
    """Runs that each took ``seconds`` at the given bytes/s (ops set when io_size is given)."""
    out = []
    for r in rates:
        nbytes = int(round(r * seconds))
        ops = nbytes // io_size if io_size else None
        out.append(Run(bytes=nbytes, seconds=seconds, ops=ops))
    return out


def make_test(name: str, rates: list[float], **kw) -> TestResult:
    return TestResult(name=name, method={}, runs=runs_at(rates, **kw))


def iops_test(name: str, iops: list[float]) -> TestResult:
    """A 4 KiB random test whose runs reach the given IOPS exactly (ops over 1 s)."""
    return TestResult(name=name, method={"block_size": 4096},
                      runs=[Run(bytes=int(i) * 4096, seconds=1.0, ops=int(i)) for i in iops])


def result_with(*tests: TestResult, reader: Reader | None = None, card: Card | None = None,
                target: dict | None = None) -> Result:
    return Result(target=target or {"kind": "directory"}, card=card or Card(name="test card"),
                  reader=reader or Reader(name="test reader"), tests=list(tests))


