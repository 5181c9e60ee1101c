"""The demo's test files (issue 30): sized by the run command's own rule
(:func:`cardbench.plan.size_for_rates`) from the rates each emulated card is set to, so that no run
is too short to time well (fixed 6 MB files made runs of 0.41-0.5 s, warned about in six of the
demo's own tests, and figures 3.5% off), and the drawer's paced I/O leaves the demo under 90 s."""

from __future__ import annotations

import pytest

from cardbench.demo import DRAWER, READER_CEILING_MB_S, RUN_SECONDS, RUNS, SPEED_FACTOR, file_size
from cardbench.emulate import CardSpec
from cardbench.plan import MAX_AUTO_SIZE, MIN_RUN_SECONDS, size_for_rates, size_from_probes
from cardbench.units import MB, MiB

CEILING = READER_CEILING_MB_S * MB * SPEED_FACTOR


def demo_cards() -> list[tuple[str, CardSpec, float | None]]:
    """The cards as run_demo sets them: the known-fast card through the reader without a ceiling,
    then the drawer through the capped reader."""
    fastest = max(DRAWER, key=lambda c: c.read_mb_s)
    out = [("known-fast", CardSpec(size=fastest.capacity_bytes, write_rate=fastest.write_mb_s * MB * SPEED_FACTOR,
                                   read_rate=fastest.read_mb_s * MB * SPEED_FACTOR), None)]
    for c in DRAWER:
        out.append((f"{c.brand} {c.capacity_bytes // MB}M",
                    CardSpec(size=c.capacity_bytes, write_rate=c.write_mb_s * MB * SPEED_FACTOR,
                             read_rate=c.read_mb_s * MB * SPEED_FACTOR), CEILING))
    return out


def test_every_demo_run_lasts_long_enough_to_time_well():
    io_seconds = 0.0
    for name, spec, ceiling in demo_cards():
        size = file_size(spec, ceiling)
        w, r = min(spec.write_rate, ceiling or spec.write_rate), min(spec.read_rate, ceiling or spec.read_rate)
        # the run command's rule, with the demo's seconds: one sizing, not a second one
        assert size == size_for_rates(w, r, MAX_AUTO_SIZE, write_seconds=RUN_SECONDS, read_seconds=RUN_SECONDS)
        shortest = min(size / w, size / r)
        assert shortest > MIN_RUN_SECONDS * 1.04, f"{name}: {size} B runs {shortest:.3f} s at the rates set"
        assert shortest >= RUN_SECONDS - MiB / max(w, r)      # whole MiB, as the run command sizes
        io_seconds += (1 + RUNS) * (size / w + size / r)
    # 90 s less what the demo spends beside paced I/O (~11 s: ten mkfs/mount/remove, two emulated
    # readers, the two cards read at once; measured 75 s in all on a quiet 2-core machine)
    assert io_seconds < 70, f"{io_seconds:.1f} s of paced I/O"


@pytest.mark.parametrize("write,read", [(20e6, 53e6), (3e6, 10.8e6), (12e6, 12e6)])
def test_the_run_commands_automatic_size_is_the_same_rule(write, read):
    probe = 16 * MiB
    size, how = size_from_probes([{"bytes": probe, "write_seconds": probe / write, "read_seconds": probe / read}],
                                 512 * MiB, 600 * MiB)
    assert size == size_for_rates(write, read, 512 * MiB)
    assert size / write == pytest.approx(3.0, abs=MiB / write) or size / read >= 1.0 - MiB / read
