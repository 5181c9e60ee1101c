"""Does a printed row agree with its own raw data? Interval arithmetic on printed figures.

Every printed number stands for an interval: "41.2" is anything in [41.15, 41.25] (half a unit in
its last printed digit). A derived figure is *consistent* when its printed interval overlaps the
interval that its inputs allow.

A survey's author computes in a chain, each figure from the one printed before it: the write
times -> the printed average -> the write MB/s from that printed average -> the write X from that
printed MB/s; the same for reads: the read times (where a CSV prints them) -> the read MB/s -> the
read X from that printed read MB/s. :func:`check_row` follows that
arithmetic (:data:`CHAIN`): each derived figure is checked against the printed figure it is
computed from, with that figure's rounding (the rule applied), and also against the unrounded
route (the MB/s from the mean of the times, the X from that rate):

* consistent with the printed figure it is computed from: right, nothing said;
* consistent only with the unrounded route (the printed input is off, or the author worked from
  unrounded figures): at most a **note** (``Flag.severity == "note"``);
* consistent with neither: an **error**, with its size in percent of what the printed input gives
  (``Flag.percent``). One slip is one error: a wrong average does not make its MB/s and X wrong
  too, a wrong MB/s does not make a right X wrong.

cardbench's own CSV computes its rate as the median of file size / each write time (no average in
the chain). The file size is taken as exact (it is an input, not a printed figure). Peer formats
with derived figures (fio, dd, hdparm, KDiskMark) check with :func:`check_figure` against the
exact counts they print.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from cardbench.units import X_BYTES_PER_S, UnitError, parse_number


@dataclass(frozen=True)
class Printed:
    """A number as printed: its text, value and half a unit in its last digit."""

    text: str
    value: float
    half_unit: float

    @classmethod
    def parse(cls, text: str) -> "Printed | None":
        """The figure ``text`` (units.parse_number's reading, no exponent), or None when it is not one."""
        return cls.read(text, "figure") if cls.figure(text) else None

    @classmethod
    def read(cls, text: str, where: str, expected: str = "a decimal number") -> "Printed":
        """The figure ``text``; UnitError naming ``where`` and ``expected`` when it is not one."""
        t = text.strip()
        value = parse_number(t, where, expected=expected, exponent=False)
        t_norm = t.replace(",", ".")
        decimals = len(t_norm.split(".", 1)[1]) if "." in t_norm else 0
        return cls(t, value, 0.5 * 10.0 ** (-decimals))

    @staticmethod
    def figure(text: str) -> bool:
        """Whether ``text`` is a printed figure (Printed.read would read it)."""
        try:
            parse_number(text, "figure", exponent=False)
        except UnitError:
            return False
        return True

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
    #: "error": off by more than a rounding step of its inputs; "note": consistent only with one route
    severity: str = "error"
    #: the rule applied (how the figure is computed from what), for the report
    rule: str | None = None

    @property
    def percent(self) -> float | None:
        """The difference in percent of what the inputs give (None when that is 0)."""
        return 100.0 * self.difference / self.computed if self.computed else None

    def __str__(self) -> str:
        d = _digits(self.tolerance)
        at = self.where or f"line {self.line}"
        pct = f"{self.percent:+.1f}%; " if self.percent is not None else ""
        text = (f"{at} ({self.row}): {self.figure} printed {self.printed}, but {self.basis} = "
                f"{self.computed:.{d}f}: off by {self.difference:+.{d}f} ({pct}rounding allows ±{self.tolerance:.{d}f})")
        if self.severity == "note":
            return f"note: {text}; {self.rule}" if self.rule else f"note: {text}"
        return text

    def to_dict(self) -> dict:
        return dict(asdict(self), percent=self.percent)


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


#: the author's arithmetic: each derived figure of a survey row and the printed figure it comes from
CHAIN = (("average write time (s)", "the write times"), ("write MB/s", "the printed average"),
         ("write X", "the printed write MB/s"), ("read X", "the printed read MB/s"))
RULE = ("each figure checked against the printed figure it is computed from, with that figure's rounding: "
        "write times -> printed average -> write MB/s -> write X; read times -> read MB/s -> read X")


def as_printed(value: float, like: Printed) -> Printed:
    """``value`` rounded as ``like`` is printed (the same number of decimals)."""
    t = like.text.replace(",", ".")
    decimals = len(t.split(".", 1)[1]) if "." in t else 0
    return Printed(f"{value:.{decimals}f}", round(value, decimals), like.half_unit)


def _route(lo: float, hi: float, printed: Printed | None) -> bool:
    if printed is None:
        return False
    slack = _EPS * max(1.0, abs(lo), abs(hi))
    return not (printed.hi < lo - slack or printed.lo > hi + slack)


Route = tuple[float, float, float, str]     # central, lo, hi, basis (in words)


def check_derived(flags: list[Flag], notes: list[Flag] | None, line: int, row: str, figure: str,
                  printed: Printed | None, chain: Route | None, *others: Route | None) -> None:
    """One derived figure, by the author's arithmetic (``chain``: central, lo, hi and basis from the
    printed figure it is computed from) and by the other routes (``others``: from unrounded
    figures, or from what the printed input should have been): an error when it fits none, a note
    in ``notes`` when it fits only another route (see the module docstring)."""
    if printed is None:
        return
    routes = [r for r in (chain, *others) if r is not None and all(math.isfinite(v) for v in r[:3])]
    if not routes:
        return
    fits = [_route(r[1], r[2], printed) for r in routes]
    first = routes[0]
    if fits[0]:
        return
    tol = printed.half_unit + max(first[2] - first[0], first[0] - first[1])
    flag = Flag(line, row, figure, printed.text, first[0], printed.value - first[0], tol, first[3])
    if any(fits[1:]):
        if notes is not None:
            other = routes[fits.index(True, 1)]
            flag.rule = (f"it agrees with {other[3]} = {other[0]:.{_digits(tol)}f} instead: computed from "
                         "unrounded figures, or the figure it comes from is the slip; not an error")
            flag.severity = "note"
            notes.append(flag)
        return
    flag.rule = f"computed from {first[3]}"
    flags.append(flag)


def check_row(*, line: int, row: str, times: list[Printed], file_bytes: int | None, avg: Printed | None,
              write_rate: Printed | None, write_x: Printed | None, read_rate: Printed | None,
              read_x: Printed | None, rate_unit_bytes: float = 1e6, rate_unit: str = "MB/s",
              rate_from: str = "mean_time", notes: list[Flag] | None = None,
              read_times: list[Printed] | None = None) -> list[Flag]:
    """The errors of one row (see the module docstring); notes go to ``notes`` when given."""
    flags: list[Flag] = []
    x = X_BYTES_PER_S
    raw_rate = None            # (central, lo, hi, basis) of the write rate from the times, in bytes/s
    if times:
        n = len(times)
        mean = statistics.fmean(t.value for t in times)
        mean_h = statistics.fmean(t.half_unit for t in times)
        check_derived(flags, notes, line, row, "average write time (s)", avg,
                      (mean, mean - mean_h, mean + mean_h, f"the mean of its {n} write time{'s' if n != 1 else ''}"),
                      None)
        if file_bytes and all(t.lo > 0 for t in times):
            if rate_from == "median_rate":
                raw_rate = (statistics.median(file_bytes / t.value for t in times),
                            statistics.median(file_bytes / t.hi for t in times),
                            statistics.median(file_bytes / t.lo for t in times),
                            f"the median of {file_bytes:,} B / each write time")
            else:
                raw_rate = (file_bytes / mean, file_bytes / (mean + mean_h), file_bytes / (mean - mean_h),
                            f"{file_bytes:,} B / the mean write time")
    chain_rate = None
    if file_bytes and avg is not None and avg.lo > 0 and rate_from != "median_rate":
        chain_rate = (file_bytes / avg.value, file_bytes / avg.hi, file_bytes / avg.lo,
                      f"{file_bytes:,} B / the printed average {avg.text} s")
    should_rate = None         # the rate from the average as it should have been printed
    if file_bytes and avg is not None and times and raw_rate is not None and rate_from != "median_rate":
        right = as_printed(statistics.fmean(t.value for t in times), avg)
        if right.lo > 0 and right.text != avg.text:
            should_rate = (file_bytes / right.value, file_bytes / right.hi, file_bytes / right.lo,
                           f"{file_bytes:,} B / {right.text} s (the mean of the times as the average is printed)")
    rate_routes = [r for r in (chain_rate, raw_rate, should_rate) if r is not None]
    if rate_routes:
        u = rate_unit_bytes
        scaled = [(c / u, lo / u, hi / u, b) for c, lo, hi, b in rate_routes]
        check_derived(flags, notes, line, row, f"write {rate_unit}", write_rate, *scaled)
    # the write X: from the printed write rate (the author's chain), else from the rate the times give
    from_printed = None
    if write_rate is not None:
        u = rate_unit_bytes
        from_printed = (write_rate.value * u / x, write_rate.lo * u / x, write_rate.hi * u / x,
                        f"the printed {write_rate.text} {rate_unit} / 150,000 B/s")
    from_times = None
    if raw_rate is not None:
        from_times = (raw_rate[0] / x, raw_rate[1] / x, raw_rate[2] / x, raw_rate[3] + " / 150,000 B/s")
    # what the write rate should have been by the chain (from the printed average), as the rate is
    # printed: an X computed before a typo in the rate agrees with it
    should = []
    if chain_rate is not None:
        if write_rate is not None:
            p = as_printed(chain_rate[0] / rate_unit_bytes, write_rate)
            u = rate_unit_bytes
            should.append((p.value * u / x, p.lo * u / x, p.hi * u / x,
                           f"{p.text} {rate_unit} (the rate the printed average gives) / 150,000 B/s"))
    if from_printed is not None or from_times is not None:
        check_derived(flags, notes, line, row, "write X", write_x, from_printed or from_times,
                      *([from_times] if from_printed is not None else []), *should)
    raw_read = None            # the read rate from printed read times (a CSV with read time columns)
    if read_times and file_bytes and all(t.lo > 0 for t in read_times):
        rmean = statistics.fmean(t.value for t in read_times)
        rh = statistics.fmean(t.half_unit for t in read_times)
        nr = len(read_times)
        raw_read = (file_bytes / rmean, file_bytes / (rmean + rh), file_bytes / (rmean - rh),
                    f"{file_bytes:,} B / the mean of its {nr} read time{'s' if nr != 1 else ''}")
        u = rate_unit_bytes
        check_derived(flags, notes, line, row, f"read {rate_unit}", read_rate,
                      (raw_read[0] / u, raw_read[1] / u, raw_read[2] / u, raw_read[3]))
    if read_rate is not None:
        u = rate_unit_bytes
        from_times = (raw_read[0] / x, raw_read[1] / x, raw_read[2] / x, raw_read[3] + " / 150,000 B/s") \
            if raw_read else None
        check_derived(flags, notes, line, row, "read X", read_x,
                      (read_rate.value * u / x, read_rate.lo * u / x, read_rate.hi * u / x,
                       f"the printed {read_rate.text} {rate_unit} / 150,000 B/s"), from_times)
    return flags
