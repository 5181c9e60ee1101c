"""Helpers for the label-verdict and reader-ceiling tests on emulated cards (a module with a
unique name, so test directories can import it without clashing).

* :class:`PhaseSettings`: a progress reporter that gives an emulated card different settings
  per test of a run (the emulator has one model per card; a real card's 4 KiB random I/O is
  no function of its sequential rate, so the A-class tests set both separately);
* :func:`iops_settings`: card settings whose 4 KiB random reads and writes land at given IOPS,
  through the per-request latency;
* :func:`printed_claims`: the claim lines of ``render_result(result, "table")`` read back;
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator

from cardbench.result import Card, Reader, Result, Run, TestResult

IO = 4096
#: a run behind an emulated reader whose medians are further than this from what the emulator was
#: set to was disturbed by the (shared, loaded) machine: it is deleted and run again, at most
#: ATTEMPTS times in all (the cluster that names a ceiling is 3% wide)
DISTURBED = 0.025
ATTEMPTS = 3
VERDICTS = ("meets", "fails", "inconclusive")


def iops_settings(read_iops: float, write_iops: float) -> dict[str, float]:
    """Emulator settings for 4 KiB random I/O at ``read_iops`` / ``write_iops``: a request of
    n bytes takes latency + n / rate (one timeline per card, so a queue does not overlap them).
    Half of a read's time is the per-request latency; the rates make up the rest."""
    if write_iops >= read_iops:
        raise ValueError("the latency is shared: set reads faster than writes")
    latency = 0.5 / read_iops
    return {"latency": latency, "read_rate": IO / (1 / read_iops - latency),
            "write_rate": IO / (1 / write_iops - latency)}


class PhaseSettings:
    """Progress reporter for :func:`cardbench.runner.run_directory` that sets the emulated card
    before each task: ``phases`` maps a task-description prefix ("seq_write", "cold_read",
    "preparing", "rand_") to card settings; the first matching prefix wins, else ``default``."""

    def __init__(self, card: Any, phases: dict[str, dict[str, float]], default: dict[str, float]):
        self.card, self.phases, self.default = card, phases, default
        self.seen: list[str] = []
        self._current: dict[str, float] | None = None

    @contextmanager
    def task(self, description: str, total: int | None) -> Iterator:
        settings = next((s for p, s in self.phases.items() if description.startswith(p)), self.default)
        if settings is not self._current:
            self.card.set(**settings)
            self._current = settings
        self.seen.append(description)
        yield lambda n: None


def collapsed(text: str) -> str:
    """Text with every run of whitespace one space (rich wraps long lines)."""
    return " ".join(text.split())


_CLAIM = re.compile(r"claim (\S+): (meets|fails|inconclusive) \(")
_MARGIN = re.compile(r"margin ([+-][0-9]+(?:\.[0-9]+)?)%")


def printed_claims(table_text: str) -> list[tuple[str, str, float | None]]:
    """(claim, verdict, printed margin or None) for each claim line of the table output."""
    text = collapsed(table_text)
    starts = [m for m in _CLAIM.finditer(text)]
    out = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        margin = _MARGIN.search(text, m.end(), end)
        out.append((m.group(1), m.group(2), float(margin.group(1)) / 100 if margin else None))
    return out


def margin_close(measured_margin: float, set_margin: float, rel: float = 0.03) -> bool:
    """measured/required - 1 within ``rel`` of the set margin: |m - s| <= rel * (1 + s), i.e.
    the measured figure within ``rel`` of the set one."""
    return abs(measured_margin - set_margin) <= rel * (1 + set_margin)


# --- results without I/O, for the re-judging flow ---------------------------------------------

def stored_run_result(name: str, read: float, write: float, *, reader: str, label: str | None = None,
                      source: str = "run", complete: bool = True) -> Result:
    """A finished result of 3 runs at exactly ``read`` / ``write`` bytes/s through reader
    ``reader`` (by name), judged as the runner judges it (check_result without observations)."""
    from cardbench.verdicts import check_result

    def test(test_name: str, rate: float) -> TestResult:
        return TestResult(name=test_name, method={}, runs=[Run(bytes=int(rate * 2), seconds=2.0)] * 3)

    result = Result(target={"kind": "directory"}, card=Card(name=name, label=label), reader=Reader(name=reader),
                    tests=[test("seq_write", write), test("cold_read", read)], source=source, complete=complete)
    if complete:
        check_result(result)
    return result
