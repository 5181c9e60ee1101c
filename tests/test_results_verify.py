"""Verify verdicts are stored with the card's identity beside its speed results and shown in
`cardbench results` (issue: fake-capacity probe, part 5)."""

from __future__ import annotations

import os

import pytest

from cardbench.store import open_store
from cardbench.units import MiB
from realparts import ROOT, call_cli

pytestmark = pytest.mark.skipif(not ROOT or not os.path.exists("/dev/fuse"), reason="needs root and FUSE")


@pytest.mark.slow
def test_verify_then_results(tmp_path):
    from cardbench.emulate import CardSpec, EmulatedCard
    db = str(tmp_path / "r.sqlite3")
    spec = CardSpec(size=256 * MiB, real_size=64 * MiB, fake_mode="wraparound", write_rate=400e6, read_rate=400e6,
                    name="fake")
    with EmulatedCard(spec) as card:
        p = call_cli("verify", card.device, "--db", db, "--journal", str(tmp_path / "journal"))
        assert p.returncode == 0, p.stderr
        with card.filesystem("ext4") as mnt:
            p = call_cli("run", mnt, "--size", "2MB", "--runs", "1", "--db", db, "--brand", "Fake", "--capacity", "256MB")
            assert p.returncode == 0, p.stderr
    with open_store(db) as store:
        docs = store.verify_results()
        assert len(docs) == 1 and docs[0]["verdict"] == "counterfeit"
        assert docs[0]["usable_bytes"] == pytest.approx(64 * MiB, rel=0.01)
        assert len(store.results()) == 1
    p = call_cli("results", "--db", db)
    assert p.returncode == 0, p.stderr
    assert "Fake" in p.stdout and "verify verdicts" in p.stdout and "COUNTERFEIT" in p.stdout
    assert "wraparound" in p.stdout
