"""The end of a measurement (cardbench.measured.keep_measured): a run on a real ext4 cut short by
SIGTERM stores its partial result; a signal that comes while a finished result is stored and
shown waits until both are done, then ends the call (exit 130) with the result kept whole."""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

import pytest

from cardbench import signals
from cardbench.errors import ExitCode, Interrupted
from cardbench.measured import holds_measurement, keep_measured
from cardbench.result import Result
from cardbench.runner import RunOptions, run_directory
from cardbench.store import open_store
from cardbench.target import DirTarget
from cardbench.units import MB


@pytest.fixture
def cli_sigterm():
    """SIGTERM raises Interrupted, as under the command line; put back afterwards."""
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signals.install_sigterm()
    yield
    for s, h in old.items():
        signal.signal(s, h)


def _to_main(sig: int) -> None:
    # to the main thread: a process-directed signal may land on a thread an earlier test left running
    signal.pthread_kill(threading.main_thread().ident, sig)


class SignalAt:
    """A progress reporter that sends ``sig`` once the task ``description`` is half done."""

    def __init__(self, description: str, sig: int) -> None:
        self.description, self.sig, self.sent = description, sig, False

    @contextmanager
    def task(self, description: str, total: int | None):
        done = [0]

        def advance(n: int) -> None:
            done[0] += n
            if description == self.description and not self.sent and total and done[0] >= total // 2:
                self.sent = True
                _to_main(self.sig)
        yield advance


def _leftovers(mnt: str) -> list[str]:
    return [n for n in os.listdir(mnt) if n.startswith("cardbench-")]


def test_a_run_cut_short_by_sigterm_stores_its_partial_result(loop_ext4, tmp_path, cli_sigterm):
    db = str(tmp_path / "r.sqlite3")
    trigger = SignalAt("seq_write run 2/3", signal.SIGTERM)
    opts = RunOptions(size=8 * MB, runs=3, warmup=1, progress=trigger)
    with pytest.raises(Interrupted, match="SIGTERM") as got:
        keep_measured(lambda: run_directory(DirTarget.open(loop_ext4), opts), db=db)
    assert trigger.sent and got.value.exit_code == ExitCode.INTERRUPTED
    rec = got.value.recorded
    assert rec is not None and rec.stored and rec.problem() is None
    with open_store(db) as store:
        [stored] = store.results()
    assert stored.id == got.value.partial.id and not stored.complete and "SIGTERM" in stored.error
    write = stored.test("seq_write")
    assert len(write.warmup) == 1 and len(write.runs) == 1 and not write.complete
    assert len(stored.test("cold_read").runs) == 1
    assert _leftovers(loop_ext4) == []


def test_a_run_stopped_before_its_first_test_stores_nothing(tmp_path):
    db = str(tmp_path / "r.sqlite3")

    def stopped_at_once() -> Result:
        raise Interrupted("stopped before any test", partial=Result(target={"kind": "directory"}))

    with pytest.raises(Interrupted, match="before any test") as got:
        keep_measured(stopped_at_once, db=db)
    assert got.value.recorded is None and not os.path.exists(db)
    assert holds_measurement([None, {"schema": "cardbench.verify/1"}]) and not holds_measurement([None, None])


def test_a_signal_while_storing_and_showing_waits_for_both(loop_ext4, tmp_path, cli_sigterm):
    db = str(tmp_path / "r.sqlite3")
    shown: list[str] = []

    def show(result: Result) -> None:
        _to_main(signal.SIGINT)          # Ctrl-C as the table is printed: it is printed whole
        shown.append(result.id)
        _to_main(signal.SIGTERM)
        shown.append("the rest of the table")

    with pytest.raises(Interrupted, match="after the measurement had finished; its result was saved") as got:
        keep_measured(lambda: run_directory(DirTarget.open(loop_ext4), RunOptions(size=2 * MB, runs=1)), db=db, show=show)
    assert len(shown) == 2 and got.value.recorded.stored
    with open_store(db) as store:
        [stored] = store.results()
    assert stored.id == shown[0] and stored.complete
    assert signals.sigterm_is_handled()     # the command line's handler is back


def test_without_saving_it_is_shown_and_nothing_is_stored(loop_ext4, tmp_path):
    db = str(tmp_path / "r.sqlite3")
    shown: list[Result] = []
    kept = keep_measured(lambda: run_directory(DirTarget.open(loop_ext4), RunOptions(size=2 * MB, runs=1)), db=db, save=False,
                         show=shown.append)
    assert kept.finished and kept.recorded is None and shown == [kept.item] and not os.path.exists(db)
