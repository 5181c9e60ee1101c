"""The drawer session's events are typed values (cardbench.drawer), worded in one place
(cardbench.report.session.event_lines): every kind has its words, and what they say."""

from __future__ import annotations

import pytest

from cardbench import drawer
from cardbench.drawer import (
    CardDone,
    CardOutcome,
    Gone,
    Ignored,
    Inserted,
    Present,
    Probed,
    ProbeFailed,
    Probing,
    Removed,
    SaveFailed,
    Verifying,
    Watching,
)
from cardbench.report.session import event_lines
from cardbench.result import Card

# drawer.Testing is not imported by name: pytest would take a class named Test* for tests

#: one of each kind, and what the session says of it
SAID = [
    (Watching(what="loop devices", method="udev", root=True),
     ["Watching loop devices for cards (udev); insert a card, Ctrl-C ends the session."]),
    (Present(devices=("/dev/sdb", "/dev/sdc"), tested=False),
     ["Already in: /dev/sdb, /dev/sdc; not tested (the session tests cards as they go in): take them out and in "
      "again, or start with --present to test them first."]),
    (Inserted(device="/dev/sdb", size=64_000_000, queued=1), ["/dev/sdb: a card went in"]),
    (Inserted(device="/dev/sdc", size=None, queued=3), ["/dev/sdc: a card went in (3 waiting)"]),
    (Removed(device="/dev/sdb"), ["/dev/sdb: card out"]),
    (Gone(device="/dev/sdb"), ["/dev/sdb: went before it could be tested"]),
    (Ignored(device="/dev/sda", why="it holds the running system (/)"),
     ["/dev/sda: ignored: it holds the running system (/)"]),
    (drawer.Testing(device="/dev/sdb", card=Card(brand="Lexar", name="4X"), recalled=True, number=2),
     ["Testing card 2 in /dev/sdb: Lexar 4X (recalled from the store)"]),
    (drawer.Testing(device="/dev/sdb", card=Card(model="SD16G"), recalled=False, number=1),
     ["Testing card 1 in /dev/sdb: SD16G"]),
    (Verifying(device="/dev/sdb", budget_s=15.0),
     ["  verifying /dev/sdb is genuine (quick probe, ~15 s; every block it writes is put back)"]),
    (CardDone(outcome=CardOutcome(device="/dev/sdb"), count=3),
     ["3 card(s) done; waiting for the next card (Ctrl-C ends)."]),
    (SaveFailed(what="/dev/sdb", error="not stored: disk full; kept in /o/x.json"),
     ["/dev/sdb: not stored: disk full; kept in /o/x.json"]),
    (Probing(devices=("/dev/sdb", "/dev/sdc")),
     ["Two cards behind one reader (/dev/sdb, /dev/sdc): reading them at once"]),
    (Probed(finding={"evidence": "together 20 MB/s, alone 20 MB/s each"}),
     ["  together 20 MB/s, alone 20 MB/s each"]),
    (ProbeFailed(devices=("/dev/sdb", "/dev/sdc"), error="/dev/sdc is gone"),
     ["  reading them at once failed: /dev/sdc is gone"]),
]


def test_every_kind_of_event_is_worded():
    assert {type(e) for e, _ in SAID} == set(drawer.EVENT_TYPES)
    assert len(drawer.EVENT_TYPES) == 13


@pytest.mark.parametrize("event,words", SAID, ids=[f"{type(e).__name__}-{i}" for i, (e, _) in enumerate(SAID)])
def test_what_the_session_says(event, words):
    assert event_lines(event) == words


def test_not_root_is_said_when_watching():
    lines = event_lines(Watching(what="mmc", method="polling", root=False))
    assert len(lines) == 2 and lines[1].startswith("Not root: a card that is not mounted cannot be read raw")


def test_an_event_is_a_value():
    with pytest.raises(AttributeError):
        Removed(device="/dev/sdb").device = "/dev/sdc"      # frozen: what was told stays told
    assert Removed(device="/dev/sdb") == Removed(device="/dev/sdb")
