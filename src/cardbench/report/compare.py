"""Two groups of results side by side (two cards, two readers or two runs), test by test.

For each test name present in either group, the per-run rates of all results in the group are
pooled and summarised (cardbench.stats): median, mean and the 95% confidence interval of the
mean. The difference is B's mean minus A's mean (and as a percentage of A's). It *exceeds the
spread of the runs* when the two 95% CIs do not overlap; when they overlap the difference may be
noise; with a single run on a side there is no CI and the answer is "cannot tell". (Non-overlap of
two 95% CIs is a conservative test: a real difference may still show overlapping intervals.)
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

from cardbench.errors import UsageError
from cardbench.report.drawer import card_title, check_rate_unit, md_table, sig
from cardbench.report.terminal import Col, fit_table, to_text
from cardbench.result import Result
from cardbench.stats import Summary, summarize
from cardbench.units import rate_in, x_rating

YES, NO, UNKNOWN = "yes", "no", "cannot tell"


@dataclass
class TestComparison:
    test: str
    a: Summary | None
    b: Summary | None

    __test__ = False

    @property
    def diff_bytes_per_s(self) -> float | None:
        return self.b.mean - self.a.mean if self.a and self.b else None

    @property
    def diff_pct(self) -> float | None:
        return 100.0 * (self.b.mean - self.a.mean) / self.a.mean if self.a and self.b and self.a.mean else None

    @property
    def beyond_spread(self) -> str:
        """yes: the 95% CIs do not overlap; no: they overlap; cannot tell: a side has < 2 runs or is missing."""
        if not self.a or not self.b or not self.a.ci95 or not self.b.ci95:
            return UNKNOWN
        (alo, ahi), (blo, bhi) = self.a.ci95, self.b.ci95
        return YES if ahi < blo or bhi < alo else NO

    def to_dict(self) -> dict:
        return {"test": self.test, "a": self.a.to_dict() if self.a else None,
                "b": self.b.to_dict() if self.b else None, "diff_bytes_per_s": self.diff_bytes_per_s,
                "diff_pct": self.diff_pct, "beyond_spread": self.beyond_spread}


def compare(a: list[Result], b: list[Result]) -> list[TestComparison]:
    """Per test name (in order of first appearance), the pooled figures of group A and group B."""
    names: list[str] = []
    for r in list(a) + list(b):
        for t in r.tests:
            if t.name not in names:
                names.append(t.name)

    def pooled(group: list[Result], name: str) -> Summary | None:
        rates = [x for r in group for t in r.tests if t.name == name for x in t.rates()]
        return summarize(rates) if rates else None

    return [TestComparison(n, pooled(a, n), pooled(b, n)) for n in names]


def render_compare(rows: list[TestComparison], label_a: str, label_b: str, fmt: str = "table",
                   rate_unit: str = "MB/s", *, width: int = 150) -> str:
    check_rate_unit(rate_unit)
    if fmt == "json":
        return json.dumps({"schema": "cardbench.compare/1", "a": label_a, "b": label_b,
                           "tests": [r.to_dict() for r in rows]}, indent=2) + "\n"
    u = rate_unit

    def med(s: Summary | None) -> str:
        return "n/a" if s is None else f"{sig(rate_in(s.median, u))} ({x_rating(s.median):.1f}X, n={s.n})"

    def ci(s: Summary | None) -> str:
        return "n/a" if s is None or not s.ci95 else f"{sig(rate_in(s.ci95[0], u))} .. {sig(rate_in(s.ci95[1], u))}"

    head = ["Test", f"A median ({u})", f"A 95% CI ({u})", f"B median ({u})", f"B 95% CI ({u})",
            f"B - A mean ({u})", "B - A (%)", "Beyond spread"]
    body = [[r.test, med(r.a), ci(r.a), med(r.b), ci(r.b),
             "n/a" if r.diff_bytes_per_s is None else f"{rate_in(r.diff_bytes_per_s, u):+.4g}",
             "n/a" if r.diff_pct is None else f"{r.diff_pct:+.1f}%", r.beyond_spread] for r in rows]
    note = ("A: " + label_a + "; B: " + label_b + ". 'Beyond spread' = the 95% confidence intervals of the two "
            "means do not overlap; 'cannot tell' = fewer than 2 runs on a side. 1X = 150,000 B/s.")
    if fmt == "md":
        return md_table(head, body, right={1, 2, 3, 4, 5, 6}) + "\n\n" + note + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        slug = u.replace("/s", "_per_s")
        w.writerow(["test", f"a_median_{slug}", f"a_ci95_low_{slug}", f"a_ci95_high_{slug}", "a_runs",
                    f"b_median_{slug}", f"b_ci95_low_{slug}", f"b_ci95_high_{slug}", "b_runs",
                    f"diff_mean_{slug}", "diff_pct", "beyond_spread"])
        for r in rows:
            def f(s, attr):
                if s is None:
                    return ""
                if attr == "n":
                    return s.n
                v = s.median if attr == "median" else (s.ci95[0 if attr == "lo" else 1] if s.ci95 else None)
                return "" if v is None else f"{rate_in(v, u):.6g}"
            w.writerow([r.test, f(r.a, "median"), f(r.a, "lo"), f(r.a, "hi"), f(r.a, "n"), f(r.b, "median"),
                        f(r.b, "lo"), f(r.b, "hi"), f(r.b, "n"),
                        "" if r.diff_bytes_per_s is None else f"{rate_in(r.diff_bytes_per_s, u):.6g}",
                        "" if r.diff_pct is None else f"{r.diff_pct:.3f}", r.beyond_spread])
        return buf.getvalue()
    if fmt != "table":
        raise UsageError(f"unknown format {fmt!r} (use table, md, csv or json)")

    drop = {2: 2, 4: 3, 5: 1}     # the CIs and the difference in MB/s go first at a narrow terminal
    table = fit_table([Col(h, right=0 < i < 7, drop=drop.get(i)) for i, h in enumerate(head)], body, width)
    parts = [f"A = {label_a}", f"B = {label_b}", ""] + compare_lines(rows) + ["", table, note]
    if table.dropped:
        parts.append(f"Left out at {width} columns: {', '.join(table.dropped)}.")
    return to_text(parts, width)


def compare_lines(rows: list[TestComparison]) -> list[str]:
    """The comparison in words, one line per test: "cold_read: B is 12.3% faster than A, beyond
    the spread of the runs"."""
    out = []
    for r in rows:
        if r.diff_pct is None:
            out.append(f"{r.test}: only {'A' if r.a else 'B'} has it.")
            continue
        how = "faster" if r.diff_pct > 0 else "slower"
        tail = {YES: "beyond the spread of the runs", NO: "within the spread of the runs (may be noise)",
                UNKNOWN: "cannot tell whether beyond the spread (fewer than 2 runs on a side)"}[r.beyond_spread]
        out.append(f"{r.test}: B is {abs(r.diff_pct):.1f}% {how} than A, {tail}." if abs(r.diff_pct) >= 0.05
                   else f"{r.test}: A and B the same.")
    return out


def resolve_group(store, text: str, by: str = "auto") -> tuple[str, list[Result]]:
    """What ``text`` names in ``store``: (a label for it, its results).

    ``by="run"``: a run id or a unique prefix of one; ``"card"`` / ``"reader"``: every run of the
    matching cards / readers (cardbench.store.query); ``"auto"``: a run id, else a card, else a reader.
    """
    if by not in ("auto", "run", "card", "reader"):
        raise UsageError(f"cannot compare by {by!r} (use auto, run, card or reader)")
    if by in ("auto", "run"):
        try:
            r = store.get(text)
            return f"run {r.id[:12]} ({card_title(r)})", [r]
        except UsageError:
            if by == "run":
                raise
    if by in ("auto", "card"):
        found = store.results(card=text)
        if found:
            n = len({r.card.identity() for r in found})
            return f"card '{text}' ({len(found)} run{'s' if len(found) != 1 else ''}, {n} card{'s' if n != 1 else ''})", found
        if by == "card":
            raise UsageError(f"no stored runs of a card matching {text!r}")
    found = store.results(reader=text)
    if found:
        return f"reader '{text}' ({len(found)} run{'s' if len(found) != 1 else ''})", found
    if by == "reader":
        raise UsageError(f"no stored runs through a reader matching {text!r}")
    raise UsageError(f"{text!r} is neither a run id nor a card or reader in the results database")
