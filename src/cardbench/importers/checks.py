"""Does a printed row agree with its own raw data? Interval arithmetic on printed figures.

Every printed number stands for an interval: "41.2" is anything in [41.15, 41.25] (half a unit in
its last printed digit). A derived figure is *consistent* when its printed interval overlaps the
interval that its raw data allow, and is flagged otherwise, naming the figure, the value its raw
data give, the difference and the rounding allowed. Raw data, per figure:

* average write time (s): the mean of the printed write times;
* write rate: file size / mean write time (the classic way), or for cardbench's own CSV the
  median of file size / each write time;
* write X: the same rate / 150,000 B/s (from the times, not from the printed rate, so one slip is
  flagged once: a wrong rate does not also flag a right X);
* read X: the printed read rate / 150,000 B/s (the read rate is itself the raw read datum).

The file size is taken as exact (it is an input, not a printed figure).
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import asdict, dataclass

from cardbench.units import X_BYTES_PER_S

_NUM_RE = re.compile(r"^[+]?(\d+(?:[.,]\d*)?|[.,]\d+)$")


@dataclass(frozen=True)
class Printed:
    """A number as printed: its text, value and half a unit in its last digit."""

    text: str
    value: float
    half_unit: float

    @classmethod
    def parse(cls, text: str) -> "Printed | None":
        t = text.strip()
        if not _NUM_RE.match(t):
            return None
        t_norm = t.replace(",", ".")
        decimals = len(t_norm.split(".", 1)[1]) if "." in t_norm else 0
        return cls(t, float(t_norm), 0.5 * 10.0 ** (-decimals))

    @property
    def lo(self) -> float:
        return self.value - self.half_unit

    @property
    def hi(self) -> float:
        return self.value + self.half_unit


@dataclass
class Flag:
    """One printed figure that disagrees with the row's own raw data beyond rounding."""

    line: int
    row: str            # the card, as the row names it
    figure: str         # e.g. "write MB/s"
    printed: str        # as printed
    computed: float     # what the raw data give (taken at face value)
    difference: float   # printed - computed
    tolerance: float    # what rounding of the printed figure and its inputs allows
    basis: str          # what it was computed from
    where: str | None = None   # a JSON key path instead of a line ("jobs[0].read")

    def __str__(self) -> str:
        d = _digits(self.tolerance)
        at = self.where or f"line {self.line}"
        return (f"{at} ({self.row}): {self.figure} printed {self.printed}, but {self.basis} = "
                f"{self.computed:.{d}f}: off by {self.difference:+.{d}f} (rounding allows ±{self.tolerance:.{d}f})")

    def to_dict(self) -> dict:
        return asdict(self)


def _digits(tol: float) -> int:
    if tol <= 0:
        return 4
    return max(1, min(6, 1 - int(math.floor(math.log10(tol)))))


_EPS = 1e-9


def check_figure(flags: list[Flag], line: int, row: str, figure: str, printed: Printed | None, central: float,
                 lo: float, hi: float, basis: str, where: str | None = None) -> None:
    """Append a Flag when the printed figure's interval misses [lo, hi] (what its raw data allow)."""
    if printed is None or not all(math.isfinite(v) for v in (central, lo, hi)):
        return
    slack = _EPS * max(1.0, abs(central))
    if printed.hi < lo - slack or printed.lo > hi + slack:
        tol = printed.half_unit + max(hi - central, central - lo)
        flags.append(Flag(line, row, figure, printed.text, central, printed.value - central, tol, basis, where))


def check_row(*, line: int, row: str, times: list[Printed], file_bytes: int | None, avg: Printed | None,
              write_rate: Printed | None, write_x: Printed | None, read_rate: Printed | None,
              read_x: Printed | None, rate_unit_bytes: float = 1e6, rate_unit: str = "MB/s",
              rate_from: str = "mean_time") -> list[Flag]:
    """All figures of one row that disagree with its raw data (see the module docstring)."""
    flags: list[Flag] = []
    if times:
        n = len(times)
        mean = statistics.fmean(t.value for t in times)
        mean_h = statistics.fmean(t.half_unit for t in times)
        check_figure(flags, line, row, "average write time (s)", avg, mean, mean - mean_h, mean + mean_h,
               f"the mean of its {n} write time{'s' if n != 1 else ''}")
        if file_bytes and all(t.lo > 0 for t in times):
            if rate_from == "median_rate":
                central = statistics.median(file_bytes / t.value for t in times)
                lo = statistics.median(file_bytes / t.hi for t in times)
                hi = statistics.median(file_bytes / t.lo for t in times)
                basis = f"the median of {file_bytes:,} B / each write time"
            else:
                central, lo, hi = file_bytes / mean, file_bytes / (mean + mean_h), file_bytes / (mean - mean_h)
                basis = f"{file_bytes:,} B / the mean write time"
            check_figure(flags, line, row, f"write {rate_unit}", write_rate, central / rate_unit_bytes,
                   lo / rate_unit_bytes, hi / rate_unit_bytes, basis)
            check_figure(flags, line, row, "write X", write_x, central / X_BYTES_PER_S, lo / X_BYTES_PER_S,
                   hi / X_BYTES_PER_S, basis + " / 150,000 B/s")
    elif write_rate is not None:
        check_figure(flags, line, row, "write X", write_x, write_rate.value * rate_unit_bytes / X_BYTES_PER_S,
               write_rate.lo * rate_unit_bytes / X_BYTES_PER_S, write_rate.hi * rate_unit_bytes / X_BYTES_PER_S,
               f"{write_rate.text} {rate_unit} / 150,000 B/s")
    if read_rate is not None:
        check_figure(flags, line, row, "read X", read_x, read_rate.value * rate_unit_bytes / X_BYTES_PER_S,
               read_rate.lo * rate_unit_bytes / X_BYTES_PER_S, read_rate.hi * rate_unit_bytes / X_BYTES_PER_S,
               f"{read_rate.text} {rate_unit} / 150,000 B/s")
    return flags
