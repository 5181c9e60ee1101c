"""Path ceilings, limit marking and plausibility checks."""

from __future__ import annotations

import pytest

from cardbench.result import Reader
from cardbench.verdicts.ceiling import (
    Ceiling,
    ceilings_for,
    mark_limits,
    observed_ceiling,
    path_ceiling,
    plausibility,
    sd_bus_ceiling,
    usb_ceiling,
)
from verdicts_helpers import make_test, result_with

M = 1_000_000


@pytest.mark.parametrize("speed,driver,typical,limit,physical,label", [
    (480, "usb-storage", 35 * M, 43 * M, 53_248_000, "USB 2.0 usb-storage"),
    ("480", "uas", 43 * M, 53_248_000, 53_248_000, "USB 2.0 uas"),
    (480.0, None, 35 * M, 43 * M, 53_248_000, "USB 2.0 driver unknown, usb-storage assumed"),
    ("5000", "uas", 400 * M, 400 * M, 500 * M, "USB 3 Gen 1 uas"),
    ("5000", "usb-storage", 400 * M, 400 * M, 500 * M, "USB 3 Gen 1 usb-storage"),
    ("10000", "uas", 1_212 * M, 1_212 * M, 1_212 * M, "USB 3 Gen 2 uas"),
    ("20000", "uas", 2_424 * M, 2_424 * M, 2_424 * M, "USB 3 Gen 2x2 uas"),
    ("12", "usb-storage", 1_100_000, 1_216_000, 1_216_000, "USB 1.1 usb-storage"),
])
def test_usb_ceilings(speed, driver, typical, limit, physical, label):
    c = usb_ceiling(speed, driver)
    assert (c.typical_bytes_per_s, c.limit_bytes_per_s, c.physical_bytes_per_s) == (typical, limit, physical)
    assert c.label == label and c.basis == "usb" and c.sources
    assert c.speed_may_be_unknown == (str(speed) == "12")


@pytest.mark.parametrize("speed", ["1.5", "999", "fast", None])
def test_no_usb_ceiling_for_low_speed_or_unknown(speed):
    assert usb_ceiling(speed, "usb-storage") is None


def test_describe_and_limited_text_for_usb2():
    c = path_ceiling(Reader(link_speed_mbit=480, driver="usb-storage"))
    assert c.describe() == "USB 2.0 usb-storage, ~35-43 MB/s"
    assert c.limited_by_text() == ("limited by the reader or bus (USB 2.0 usb-storage, ~35-43 MB/s); "
                                   "the card may be faster")
    assert c.limited_from_bytes_per_s == pytest.approx(31.5 * M)


def test_path_ceiling_unknown_reader_is_none():
    assert path_ceiling(Reader(name="by name only")) is None
    assert path_ceiling(Reader(transport="mmc")) is None   # native slot, bus mode unknown


@pytest.mark.parametrize("mode,expected", [("DS", 12.5 * M), ("legacy", 12.5 * M), ("HS", 25 * M),
                                           ("sd high-speed", 25 * M), ("SDR50", 50 * M), ("DDR50", 50 * M),
                                           ("sd uhs SDR104", 104 * M), ("6 (sd uhs SDR104)", 104 * M)])
def test_sd_bus_modes(mode, expected):
    c = path_ceiling(Reader(transport="mmc"), sd_mode=mode)
    assert c.limit_bytes_per_s == c.typical_bytes_per_s == c.physical_bytes_per_s == expected
    assert c.basis == "sd-bus"


def test_sd_bus_actual_clock_wins():
    c = sd_bus_ceiling("SDR104", clock_hz=50_000_000)
    assert c.limit_bytes_per_s == 25 * M
    assert sd_bus_ceiling("DDR50", clock_hz=50_000_000).limit_bytes_per_s == 50 * M
    assert sd_bus_ceiling("unheard-of") is None


def test_mark_limits_at_ceiling():
    res = result_with(make_test("cold_read", [33 * M] * 3), make_test("seq_write", [12 * M] * 3))
    c = usb_ceiling("480", "usb-storage")
    mark_limits(res, c)
    read, write = res.tests
    assert read.limited_by == ("limited by the reader or bus (USB 2.0 usb-storage, ~35-43 MB/s); "
                               "the card may be faster")
    assert any("ceiling" in w for w in read.warnings)
    assert write.limited_by is None and write.warnings == []
    mark_limits(res, c)    # idempotent
    assert len(read.warnings) == 1


def test_mark_limits_just_below_the_zone():
    res = result_with(make_test("cold_read", [31 * M] * 3))
    mark_limits(res, usb_ceiling("480", "usb-storage"))
    assert res.tests[0].limited_by is None


def test_mark_limits_implausible_above_physical():
    res = result_with(make_test("cold_read", [60 * M] * 3))
    mark_limits(res, usb_ceiling("480", "usb-storage"))
    t = res.tests[0]
    assert t.limited_by is None
    assert len(t.warnings) == 1 and "implausible" in t.warnings[0] and "cache" in t.warnings[0]


def test_mark_limits_on_a_12_link_says_speed_unknown():
    res = result_with(make_test("cold_read", [20 * M] * 3))
    mark_limits(res, usb_ceiling("12", "usb-storage"))
    t = res.tests[0]
    assert t.limited_by is None and "unknown" in t.warnings[0] and "implausible" not in t.warnings[0]


def test_mark_limits_per_direction_mapping():
    res = result_with(make_test("cold_read", [3.7 * M] * 3), make_test("seq_write", [3.7 * M] * 3))
    observed = Ceiling(limit_bytes_per_s=3.8 * M, typical_bytes_per_s=3.8 * M, physical_bytes_per_s=None,
                       label="reader X, observed read ceiling", basis="observed", directions=("read",))
    mark_limits(res, {"read": observed})
    assert res.tests[0].limited_by and res.tests[0].limited_by.startswith("limited by the reader (")
    assert res.tests[1].limited_by is None
    mark_limits(res, observed)   # a single Ceiling only applies to its own directions
    assert res.tests[1].limited_by is None


def test_mark_limits_none_does_nothing():
    res = result_with(make_test("cold_read", [60 * M] * 3))
    mark_limits(res, None)
    assert res.tests[0].warnings == [] and res.tests[0].limited_by is None


def test_plausibility_tenfold_and_memory_speed():
    res = result_with(make_test("seq_write", [1 * M, 11 * M, 5 * M]),
                      make_test("cold_read", [25_000 * M, 24_000 * M]),
                      make_test("raw_read", [20 * M, 21 * M, 19 * M]))
    added = plausibility(res)
    w, r, ok = res.tests
    assert len(w.warnings) == 1 and "disagree" in w.warnings[0]
    assert len(r.warnings) == 1 and "memory speed: the page cache answered, not the card" in r.warnings[0]
    assert ok.warnings == []
    assert len(added) == 2
    assert plausibility(res) == []   # nothing new the second time


def test_plausibility_just_under_tenfold_is_quiet():
    res = result_with(make_test("seq_write", [1 * M, 9.9 * M]))
    assert plausibility(res) == []


def test_plausibility_memory_speed_write():
    res = result_with(make_test("seq_write", [30_000 * M] * 2))
    (warning,) = plausibility(res)
    assert "page cache" in warning and "writes" in warning


def test_ceilings_for_combines_link_and_observed():
    reader = Reader(name="R", link_speed_mbit=480, driver="usb-storage")
    res = result_with(reader=reader)
    assert set(ceilings_for(res)) == {"read", "write"}
    observed = [{"identity": reader.identity(), "name": "R", "findings": [
        {"direction": "read", "ceiling_bytes_per_s": 20 * M, "cluster_max_bytes_per_s": 20.4 * M,
         "confidence": "likely", "evidence": "5 of 6 cards read at 20 MB/s"},
        {"direction": "write", "ceiling_bytes_per_s": 9 * M, "confidence": "possible", "evidence": "..."}]}]
    both = ceilings_for(res, observed)
    assert both["read"].basis == "observed" and both["read"].typical_bytes_per_s == 20 * M
    assert both["read"].limit_bytes_per_s == 20.4 * M
    assert both["read"].physical_bytes_per_s == 53_248_000      # the link's maximum is kept
    assert both["write"].basis == "usb"                          # "possible" is not used by default
    assert ceilings_for(res, [{**observed[0], "identity": "usb:other"}])["read"].basis == "usb"


def test_observed_ceiling_none_without_a_figure():
    assert observed_ceiling({"ceiling_bytes_per_s": None, "confidence": "none"}) is None
    assert observed_ceiling({"ceiling_bytes_per_s": 5 * M, "confidence": "possible"}) is None
    assert observed_ceiling({"ceiling_bytes_per_s": 5 * M, "confidence": "possible"},
                            accept=("likely", "possible")).typical_bytes_per_s == 5 * M
