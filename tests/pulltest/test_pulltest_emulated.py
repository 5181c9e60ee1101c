"""Pull tests on emulated cards with a volatile write cache (issue 32): real loop devices behind a
FUSE server, pulled (loop device detached) and put back (on a new loop device) while written."""

from __future__ import annotations

import _thread
import mmap
import subprocess
import threading
import time

import pytest

from cardbench.emulate import EmulatedCard, EmulatedReader
from cardbench.engine.data import DataFile
from cardbench.errors import Interrupted, SafetyRefusal, TargetError
from cardbench.pulltest import HostLogError, PullOptions, resume_pulltest, run_pulltest
from cardbench.pulltest.hostlog import read_log
from cardbench.target import open_target
from cardbench.units import MB, MiB
from pull_helpers import (
    Puller,
    layout,
    needs_emulator,
    records_lost,
    spec,
)

pytestmark = [needs_emulator, pytest.mark.slow]


def _opts(tmp_path, puller=None, **kw) -> PullOptions:
    lines: list[str] = []
    kw.setdefault("layout", layout())
    kw.setdefault("mix", "small")
    kw.setdefault("timeout", 60)
    opts = PullOptions(prompt=False, log_dir=str(tmp_path / "log"), say=lines.append,
                       events=puller.events if puller else None, **kw)
    opts.lines = lines  # type: ignore[attr-defined]
    return opts


def _target(card):
    return open_target(card.device, kinds=("device",))


# -- the emulator's volatile cache --------------------------------------------------------------

def _write(f, value: int, offset: int) -> None:
    buf = mmap.mmap(-1, 4096)
    buf[:] = bytes([value]) * 4096
    f.write_exact(buf, offset)


def _read(f, offset: int) -> bytes:
    buf = mmap.mmap(-1, 4096)
    f.read_exact(buf, offset)
    return bytes(buf[:1])


@needs_emulator
@pytest.mark.parametrize("flush", ["honest", "liar"])
def test_volatile_cache_flush_pull_and_reinsert(flush):
    """Writes sit in the cache (read back from it) and drain at the set rate; an honest flush
    waits for the drain, a liar's returns at once; a pull loses what is still cached; the card
    comes back with what drained."""
    drain = 0.5 * MB
    with EmulatedCard(spec(flush, cache=1 * MiB)) as card:
        card.set(drain_rate=drain)
        target = _target(card)
        assert not target.gone()
        with DataFile.open(card.device, write=True) as f:
            for i in range(32):                      # 128 KiB: 0.26 s of drain
                _write(f, 1, i * 65536)
            assert _read(f, 0) == b"\x01"            # read from the cache
            t0 = time.monotonic()
            f.datasync()
            took = time.monotonic() - t0
            held = card.status()["volatile_held"]
            if flush == "honest":
                assert held == 0 and 0.1 < took < 1.0, (took, held)
            else:
                assert held > 0 and took < 0.1, (took, held)
            for i in range(32):                      # 128 KiB more, then pull at once
                _write(f, 2, i * 65536 + 4096)
            st = card.pull()
        assert st["lost_now"] > 0 and st["counters"]["pulls"] == 1
        assert target.gone(wait=3.0)                 # the loop device was detached: gone
        device = card.reinsert()
        with DataFile.open(device, write=False) as f:
            first = [_read(f, i * 65536) for i in range(32)]
            second = [_read(f, i * 65536 + 4096) for i in range(32)]
        # drained in order: what survived is a prefix of what was written, the rest was lost
        kept = first.count(b"\x01") + second.count(b"\x02")
        survived = (first + second)[:kept]
        assert survived == [b"\x01"] * min(kept, 32) + [b"\x02"] * max(0, kept - 32)
        # (a torn write, its front kept, counts in both)
        assert 0 <= kept * 4096 + st["lost_now"] - 64 * 4096 < 4096
        if flush == "honest":
            assert first == [b"\x01"] * 32


# -- the pull test over models ------------------------------------------------------------------

def test_honest_card_keeps_everything_over_20_pulls(tmp_path):
    # small scattered and large sequential records: a pull may cut a large one in flight
    with EmulatedCard(spec("honest", cache=2 * MiB)) as card:
        puller = Puller(card, drain=4 * MB, after=0.25)
        doc = run_pulltest(_target(card), _opts(tmp_path, puller, cycles=20, mix="both"))
    assert not puller.errors
    assert len(doc["pulls"]) == 20 and doc["complete"]
    assert all(p["acknowledged"] > 0 for p in doc["pulls"])
    assert (doc["lost"], doc["torn"], doc["old_damaged"]) == (0, 0, 0)
    assert doc["verdict"] == "keeps"
    assert doc["answer"] == f"Keeps what it acknowledges: 0 of {doc['acknowledged']:,} acknowledged writes lost in 20 pulls"
    print(f"\nhonest: {doc['acknowledged']} acknowledged writes judged, {doc['in_flight']} in flight "
          f"({doc['in_flight_torn']} torn), 20 pulls")


def test_liar_is_caught_with_the_right_count_and_ages(tmp_path):
    cache, drain = 512 * 1024, 0.25 * MB
    with EmulatedCard(spec("liar", cache=cache)) as card:
        puller = Puller(card, drain=drain, after=0.5, when_held=cache - 8192, then=cache / drain + 0.3)
        doc = run_pulltest(_target(card), _opts(tmp_path, puller, layout=layout(small=2048)))
    assert not puller.errors
    pull = doc["pulls"][0]
    emulated = records_lost(puller.pulls[0])
    # every record the pull took from the cache is counted (the one in flight may be one of them)
    assert pull["lost"] + pull["torn"] <= emulated <= pull["lost"] + pull["torn"] + pull["in_flight"]
    assert pull["lost"] > 100
    empty = cache / drain
    oldest = max(pull["lost_ages_s"])
    assert 0 <= pull["pull_window_s"] < 0.1 * empty
    assert abs(oldest - empty) <= 0.1 * empty, (oldest, empty)
    assert doc["verdict"] == "loses"
    assert doc["answer"].startswith(f"Loses acknowledged writes: {pull['lost'] + pull['torn']:,} of "
                                    f"{pull['acknowledged']:,} (up to {oldest:.1f} s old")
    assert doc["answer"].endswith("a flush does not make data durable on this card")
    print(f"\nliar: {pull['lost']} lost + {pull['torn']} torn of {pull['acknowledged']} (emulator: {emulated}), "
          f"oldest {oldest:.3f} s, cache/drain {empty:.3f} s")


def test_torn_large_write_is_found_torn(tmp_path):
    with EmulatedCard(spec("liar", cache=2 * MiB)) as card:
        puller = Puller(card, drain=1 * MB, after=0.3, when_held=int(1.5 * MiB))
        doc = run_pulltest(_target(card), _opts(tmp_path, puller, mix="large", layout=layout(large=6)))
    assert not puller.errors
    assert puller.pulls[0]["counters"]["bytes_torn"] > 0
    assert doc["torn"] >= 1 and doc["verdict"] == "loses", doc["pulls"]


def test_old_data_damage_is_found(tmp_path):
    # the pull scrambles 5 records of the old region (written and verified before any pull)
    lay = layout()
    damage = [(lay.old_start + 8192, lay.old_start + 8192 + 5 * 4096)]
    with EmulatedCard(spec("honest", pull_damage=damage)) as card:
        puller = Puller(card, drain=1 * MB, after=0.25)
        doc = run_pulltest(_target(card), _opts(tmp_path, puller, layout=lay))
    assert (doc["old_damaged"], doc["lost"], doc["torn"]) == (5, 0, 0)
    assert doc["verdict"] == "loses"
    assert doc["answer"].startswith("Damages old data: 5 records written before the pull read back wrong")


def test_a_different_card_put_back_is_refused(tmp_path):
    with EmulatedReader() as reader:
        card = reader.add_card(spec("honest", name="a"))

        class Swap(Puller):
            def _pull_later(self):
                time.sleep(self.after)
                self.pulls.append(self.card.pull())
                time.sleep(0.3)
                self.other = reader.add_card(spec("honest", name="b"))

        puller = Swap(card, drain=1 * MB, after=0.25)
        with pytest.raises(SafetyRefusal) as e:
            run_pulltest(_target(card), _opts(tmp_path, puller))
        other = puller.other
        assert "\n" not in e.value.message
        assert e.value.message.startswith(f"{other.device} came back, but it is not the card that was pulled")
        assert other.status()["counters"]["writes"] == 0


# -- bad input -------------------------------------------------------------------------------------

def test_pull_before_the_first_acknowledgement(tmp_path):
    with EmulatedCard(spec("honest")) as card:
        class Early(Puller):
            def events(self, name, details):
                if name == "cycle":
                    self.pulls.append(self.card.pull())
                    threading.Timer(0.2, self.card.reinsert).start()

        opts = _opts(tmp_path, Early(card, drain=1 * MB))
        doc = run_pulltest(_target(card), opts)
    assert doc["pulls"][0]["acknowledged"] == 0 and doc["verdict"] == "inconclusive"
    assert any(line.startswith("The card went away before the first write of this cycle was acknowledged")
               for line in opts.lines)  # type: ignore[attr-defined]
    assert doc["answer"].startswith("Inconclusive: no acknowledged write could be judged in 1 pull")


def test_never_back_then_ctrl_c_keeps_the_log_and_resume_verifies(tmp_path):
    with EmulatedCard(spec("liar")) as card:
        puller = Puller(card, drain=0.25 * MB, after=0.5, back=False)
        opts = _opts(tmp_path, puller)
        waiting = threading.Event()
        opts.say = lambda line: waiting.set() if line.startswith("Put the card back") else None
        threading.Thread(target=lambda: (waiting.wait(30), time.sleep(0.5), _thread.interrupt_main()),
                         daemon=True).start()
        with pytest.raises(Interrupted) as e:
            run_pulltest(_target(card), opts)
        assert "\n" not in e.value.message and "the log is kept" in e.value.message
        logs = list((tmp_path / "log").iterdir())
        assert len(logs) == 1 and [x["e"] for x in read_log(logs[0])][-1] == "pull"
        device = card.reinsert()
        doc = resume_pulltest(open_target(device, kinds=("device",)), _opts(tmp_path))
    assert len(doc["pulls"]) == 1 and doc["complete"]
    assert doc["pulls"][0]["lost"] > 0 and doc["verdict"] == "loses"
    assert [x["e"] for x in read_log(logs[0])][-2:] == ["verified", "end"]


def test_host_disk_full_while_logging(tmp_path):
    logs = tmp_path / "log"
    logs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "cardbench-test-full", str(logs)], check=True)
    try:
        with EmulatedCard(spec("honest")) as card:
            opts = _opts(tmp_path)
            with pytest.raises(HostLogError) as e:
                run_pulltest(_target(card), opts)
            written = card.status()["counters"]["bytes_written"]
        assert e.value.message.startswith("the host's disk is full: cannot add to the pull test log")
        entries = read_log(next(logs.iterdir()))
        assert entries[0]["e"] == "start" and entries[-1]["e"] in ("rec", "ack")
        # every record the card got is in the log (the one whose line failed was never submitted)
        recs = [x for x in entries if x["e"] == "rec"]
        assert 0 < written <= 4096 + sum(x["len"] for x in recs)  # the label and the logged records
    finally:
        subprocess.run(["umount", str(logs)], check=False)


def test_card_back_read_only(tmp_path):
    with EmulatedCard(spec("honest")) as card:
        puller = Puller(card, drain=1 * MB, after=0.25, read_only=True)
        doc = run_pulltest(_target(card), _opts(tmp_path, puller, cycles=3))
    assert len(doc["pulls"]) == 1 and not doc["complete"]
    assert doc["error"].endswith("came back read-only: what it kept was verified (pull 1), but no more cycles "
                                 "can be written")
    assert doc["verdict"] == "keeps"


def test_ctrl_c_while_writing_then_resume_judges_up_to_there(tmp_path):
    """Stopped while writing (no pull): --resume takes the end of the log as the pull and
    judges what the card kept; an honest card kept every acknowledged write."""
    with EmulatedCard(spec("honest")) as card:
        opts = _opts(tmp_path)
        writing = threading.Event()
        opts.events = lambda name, details: writing.set() if name == "cycle" else None
        threading.Thread(target=lambda: (writing.wait(30), time.sleep(0.5), _thread.interrupt_main()),
                         daemon=True).start()
        with pytest.raises(Interrupted) as e:
            run_pulltest(_target(card), opts)
        assert e.value.message.startswith("interrupted while writing (cycle 1, ")
        doc = resume_pulltest(_target(card), _opts(tmp_path))
    (pull,) = doc["pulls"]
    assert pull["acknowledged"] > 0 and (pull["lost"], pull["torn"]) == (0, 0) and doc["verdict"] == "keeps"


def test_card_not_back_within_the_timeout(tmp_path):
    with EmulatedCard(spec("honest")) as card:
        puller = Puller(card, drain=1 * MB, after=0.3, back=False)
        with pytest.raises(TargetError) as e:
            run_pulltest(_target(card), _opts(tmp_path, puller, timeout=1.5))
    assert "\n" not in e.value.message
    assert e.value.message.startswith("the card did not come back within 1.5 s; the log is kept (")
    (log,) = (tmp_path / "log").iterdir()
    assert [x["e"] for x in read_log(log)][-1] == "pull"
