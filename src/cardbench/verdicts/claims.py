"""Judge a result against the claims of a label (or a card's register).

``judge(result, parse_label("C10 U3 A1 133x"))`` gives one row per check of each claim::

    {"claim": "U3", "name": "U3", "kind": "uhs_speed_class", "origin": "label", "primary": True,
     "test": "seq_write", "direction": "write", "measured": 31.5e6, "required": 30e6, "unit": "B/s",
     "margin": 0.05, "verdict": "meets", "reason": "...", "note": "indicative, not compliance: ...",
     "ci95": [lo, hi] | None, "marginal": False, "limited_by": None, "alt_required": None,
     "sources": ["S13", "S20"]}

``alt_required`` is the X requirement at the CD-ROM reading (153,600 B/s per X), else None.

Verdicts:

* ``meets``: the measured median reaches the requirement and the spread does not straddle it.
  For SD classes a median between N x 10^6 and N x 2^20 B/s is a *marginal* pass (the spec's
  "MB" is unverified, standards.md §2.7): ``marginal`` is True and the reason says so.
* ``fails``: the median is below the requirement, the spread does not straddle it, and the path
  could have carried the requirement.
* ``inconclusive``: the test was not run; the path's ceiling is below the requirement (a USB 2.0
  reader cannot show 90 MB/s); the figure is at the path's ceiling and below the requirement
  (reader-limited); the 95% confidence interval and the runs themselves straddle the requirement (spread too wide to
  tell); the figure exceeds what the path can physically carry (a cache answered); an A2
  random-IOPS shortfall on a host not known to queue commands [S15][S22]; or the claim is an
  interface mode (UDMA, UHS-I), which is a ceiling, not a speed promise.

X labels have two rows: the primary one judged on read (the common modern meaning [S3][S9]) and a
non-primary flag on write (Kingston's and Crucial's definition [S1][S2][S5]), per the reference
notes' tool note (standards.md §1.2).

Every row carries :data:`INDICATIVE_NOTE`: a Linux host, least of all one behind a USB reader,
cannot reproduce the SD bus test conditions (CMD20, AU alignment, bus clock) [S12].
"""

from __future__ import annotations

from typing import Any, Iterable

from cardbench.result import Result, TestResult
from cardbench.stats import summarize
from cardbench.units import MB, MiB, fmt_rate
from cardbench.verdicts.ceiling import Ceiling, Ceilings, ceilings_for, pick
from cardbench.verdicts.labels import Check, Claim, udma_against_card

INDICATIVE_NOTE = ("indicative, not compliance: a host behind a USB reader cannot reproduce the SD bus test "
                   "conditions (CMD20 Start Recording, AU alignment, bus clock) [S12], and vendors' own test "
                   "conditions are not published")

MEETS, FAILS, INCONCLUSIVE = "meets", "fails", "inconclusive"

_RW = {"read": "read", "write": "write", "sustained write": "write", "random read": "read",
       "random write": "write", "interface": "read"}
_RANDOM_PREFIX = {"random read": "rand_read_4k", "random write": "rand_write_4k"}
IO_SIZE = 4096


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "IOPS":
        return f"{value:,.0f} IOPS"
    return fmt_rate(value, digits=3 if value < 100 * MB else 1)


def _find_test(result: Result, check: Check) -> TestResult | None:
    for name in check.tests:
        t = result.test(name)
        if t is not None and t.rates():
            return t
    prefix = _RANDOM_PREFIX.get(check.direction)
    if prefix:
        for t in result.tests:
            if t.name.startswith(prefix) and t.rates():
                return t
    return None


def _values(test: TestResult, unit: str) -> list[float]:
    if unit == "IOPS":
        iops = test.iops_values()
        if iops:
            return iops
        size = int(test.method.get("block_size") or test.method.get("block") or IO_SIZE)
        return [r / size for r in test.rates()]
    return test.rates()


def _row(claim: Claim, check: Check, **kw: Any) -> dict[str, Any]:
    row = {"claim": claim.text, "name": claim.name, "kind": claim.kind, "origin": claim.origin,
           "primary": check.primary, "test": None, "direction": check.direction, "measured": None,
           "required": check.required, "unit": check.unit, "margin": None, "verdict": INCONCLUSIVE,
           "reason": "", "note": INDICATIVE_NOTE, "ci95": None, "marginal": False, "limited_by": None,
           "alt_required": check.alt_required, "sources": list(claim.sources)}
    row.update(kw)
    if not check.primary:
        row["reason"] = f"flag only ({check.meaning}): {row['reason']}"
    return row


def judge_check(result: Result, claim: Claim, check: Check, ceilings: Ceilings) -> dict[str, Any]:
    """One row: the verdict of one check of one claim (see the module docstring)."""
    test = _find_test(result, check)
    if test is None:
        wanted = " or ".join(check.tests)
        return _row(claim, check, reason=f"not measured: this result has no {wanted} test")
    values = _values(test, check.unit)
    s = summarize(values)
    measured, required = s.median, float(check.required)
    ci = list(s.ci95) if s.ci95 else None
    base = dict(test=test.name, measured=measured, ci95=ci, limited_by=test.limited_by)
    spread = "" if ci else " (one run: spread unknown)"

    if check.direction == "interface":
        share = measured / required
        reason = (f"{check.meaning}. Measured {test.name} {_fmt(measured, 'B/s')}, {share:.0%} of that ceiling")
        if measured > required:
            reason += ("; faster than this mode allows: the card supports a faster mode than labelled, "
                       "or a cache answered")
        if claim.kind == "udma" and result.card.ata:
            reason += "; " + udma_against_card(claim.name, result.card.ata)[1]
        return _row(claim, check, **base, reason=reason + ".")

    margin = measured / required - 1
    base["margin"] = margin
    c: Ceiling | None = None
    if check.unit == "B/s":
        c = pick(ceilings, test.name, _RW[check.direction])
        if c is not None and c.speed_may_be_unknown and c.physical_bytes_per_s is not None \
                and measured > c.physical_bytes_per_s:
            c = None   # "12" also means "unknown speed": the figure shows the link is faster
    # every verdict says the margin, also an inconclusive one (the figure was measured all the same)
    got = (f"{_fmt(measured, check.unit)} measured ({test.name}) against {_fmt(required, check.unit)} required, "
           f"margin {margin:+.1%}")

    if c is not None and c.physical_bytes_per_s is not None and measured > c.physical_bytes_per_s:
        return _row(claim, check, **base, reason=(
            f"{got}: faster than {c.physical_label or c.label} can carry ({_fmt(c.physical_bytes_per_s, 'B/s')}), "
            "so the figure came "
            "from a cache, not the card"))
    if c is not None and c.limit_bytes_per_s < required:
        return _row(claim, check, **base, reason=(
            f"{got}: this path cannot show it ({c.describe()}); test the card in a faster reader"))
    if s.too_wide and s.ci95 is not None and check.unit == "B/s":    # too wide: two runs or more, so a CI
        return _row(claim, check, **base, reason=(
            f"{got}: spread too wide to judge the label by (the runs went from {_fmt(s.min, check.unit)} to "
            f"{_fmt(s.max, check.unit)}, {s.spread:.0%} of the median; 95% CI {_fmt(s.ci95[0], check.unit)} to "
            f"{_fmt(s.ci95[1], check.unit)}): the path was disturbed; run again when the machine is quiet"))
    # the runs themselves straddle it, not only a CI widened by few runs (2 runs: t = 12.7)
    if ci and ci[0] < required < ci[1] and s.min < required <= s.max:
        return _row(claim, check, **base, reason=(
            f"{got}: spread too wide to tell (95% CI {_fmt(ci[0], check.unit)} to {_fmt(ci[1], check.unit)} "
            "straddles the requirement); run more repetitions"))
    if measured >= required:
        reason = f"{got}{spread}"
        marginal = False
        if check.marginal_band and required / MB * MiB > measured:
            marginal = True
            reason += (f"; marginal: below {_fmt(required / MB * MiB, 'B/s')}, which the requirement would be "
                       "if the spec's MB were 2^20 B")
        if check.alt_required and measured < check.alt_required:
            reason += (f"; at the CD-ROM reading of X (153,600 B/s) it would need "
                       f"{_fmt(check.alt_required, 'B/s')}")
        return _row(claim, check, **base, verdict=MEETS, marginal=marginal, reason=reason)
    limited = test.limited_by is not None or (c is not None and measured >= c.limited_from_bytes_per_s)
    if limited:
        where = test.limited_by or (c.limited_by_text() if c else "")
        return _row(claim, check, **base, reason=(
            f"{got}: the figure is at the path's ceiling ({where}), so the card may be faster"))
    if check.needs_command_queuing and not result.target.get("command_queuing"):
        return _row(claim, check, **base, reason=(
            f"{got}: {claim.name} relies on the host's command queuing and cache [S15], "
            "which this host is not known to use (without them A2 cards are no faster than A1 [S22])"))
    return _row(claim, check, **base, verdict=FAILS, reason=f"{got}{spread}")


def judge(result: Result, claims: Iterable[Claim], ceilings: Ceilings | dict = None) -> list[dict[str, Any]]:
    """Judge every check of every claim against ``result``; one row (dict) per check.

    ``ceilings``: None derives them from the result's reader (:func:`ceilings_for`); a
    :class:`Ceiling` applies to both directions; a mapping is keyed by test name or by "read" /
    "write"; an empty mapping judges without any ceiling. A test already marked ``limited_by``
    (:func:`cardbench.verdicts.ceiling.mark_limits`) counts as reader-limited either way.
    """
    if ceilings is None:
        ceilings = ceilings_for(result)
    return [judge_check(result, claim, check, ceilings) for claim in claims for check in claim.checks]
