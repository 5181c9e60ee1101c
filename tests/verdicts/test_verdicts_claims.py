"""judge(): verdicts and margins at 5% either side of each threshold, and the inconclusive cases."""

from __future__ import annotations

import pytest

from cardbench.result import Reader
from cardbench.verdicts.ceiling import mark_limits, path_ceiling
from cardbench.verdicts.claims import INDICATIVE_NOTE, judge
from cardbench.verdicts.labels import parse_label
from verdicts_helpers import iops_test, make_test, result_with

M = 1_000_000
USB2 = Reader(name="usb2 reader", link_speed_mbit=480.0, driver="usb-storage", transport="usb")


def primary(rows):
    return [r for r in rows if r["primary"]]


def one(rows, direction=None):
    rows = [r for r in primary(rows) if direction is None or r["direction"] == direction]
    assert len(rows) == 1, rows
    return rows[0]


# (label, test name, threshold in B/s) for the sequential-write classes
WRITE_CLASSES = [("C2", 2 * M), ("C4", 4 * M), ("C6", 6 * M), ("C10", 10 * M), ("U1", 10 * M), ("U3", 30 * M),
                 ("V6", 6 * M), ("V10", 10 * M), ("V30", 30 * M), ("V60", 60 * M), ("V90", 90 * M),
                 ("E150", 150 * M), ("VPG-20", 20 * M)]


@pytest.mark.parametrize("factor,verdict", [(1.05, "meets"), (0.95, "fails")])
@pytest.mark.parametrize("label,threshold", WRITE_CLASSES)
def test_write_classes_either_side_of_threshold(label, threshold, factor, verdict):
    rate = threshold * factor
    res = result_with(make_test("seq_write", [rate] * 3), make_test("sustained_write", [rate] * 3))
    row = one(judge(res, parse_label(label)))
    assert row["verdict"] == verdict, row["reason"]
    assert row["margin"] == pytest.approx(factor - 1, abs=1e-6)
    assert row["required"] == threshold
    assert row["unit"] == "B/s"
    assert row["measured"] == pytest.approx(rate, rel=1e-6)
    assert row["test"] == ("sustained_write" if label.startswith("VPG") else "seq_write")
    assert row["marginal"] is False


@pytest.mark.parametrize("factor,verdict", [(1.05, "meets"), (0.95, "fails")])
@pytest.mark.parametrize("x", [4, 32, 133, 266, 600, 1066])
def test_x_on_read_either_side(x, factor, verdict):
    rate = x * 150_000 * factor
    res = result_with(make_test("cold_read", [rate] * 3), make_test("seq_write", [rate / 10] * 3))
    rows = judge(res, parse_label(f"{x}x"))
    read = one(rows, "read")
    assert read["verdict"] == verdict and read["test"] == "cold_read"
    assert read["margin"] == pytest.approx(factor - 1, abs=1e-6)
    flag = [r for r in rows if not r["primary"]]
    assert len(flag) == 1 and flag[0]["direction"] == "write" and flag[0]["verdict"] == "fails"
    assert flag[0]["reason"].startswith("flag only")


def test_x_write_flag_meets_when_write_does():
    res = result_with(make_test("cold_read", [21 * M] * 3), make_test("seq_write", [21 * M] * 3))
    rows = judge(res, parse_label("133x"))
    assert [r["verdict"] for r in rows] == ["meets", "meets"]


def test_x_meets_only_at_the_decimal_reading_says_so():
    rate = 133 * 151_000   # between 133 x 150,000 and 133 x 153,600
    res = result_with(make_test("cold_read", [rate] * 3))
    row = one(judge(res, parse_label("133x")), "read")
    assert row["verdict"] == "meets"
    assert "CD-ROM" in row["reason"]


@pytest.mark.parametrize("factor", [1.05, 0.95])
@pytest.mark.parametrize("label,read_iops,write_iops", [("A1", 1500, 500), ("A2", 4000, 2000)])
def test_app_classes_on_iops_and_sustained_write(label, read_iops, write_iops, factor):
    res = result_with(iops_test("rand_read_4k_q32t1", [read_iops * factor] * 3),
                      iops_test("rand_write_4k_q32t1", [write_iops * factor] * 3),
                      make_test("sustained_write", [10 * M * factor] * 3),
                      target={"command_queuing": True})
    rows = judge(res, parse_label(label))
    assert [r["direction"] for r in rows] == ["random read", "random write", "sustained write"]
    expected = "meets" if factor > 1 else "fails"
    for row in rows:
        assert row["verdict"] == expected, row["reason"]
        assert row["margin"] == pytest.approx(factor - 1, abs=1e-3)
    assert rows[0]["unit"] == rows[1]["unit"] == "IOPS" and rows[2]["unit"] == "B/s"
    assert rows[0]["required"] == read_iops and rows[1]["required"] == write_iops


def test_a2_shortfall_without_command_queuing_is_inconclusive_a1_fails():
    tests = [iops_test("rand_read_4k_q1t1", [1400] * 3), iops_test("rand_write_4k_q1t1", [400] * 3)]
    res = result_with(*tests)   # target says nothing about command queuing
    a2 = judge(res, parse_label("A2"))
    assert [r["verdict"] for r in a2[:2]] == ["inconclusive", "inconclusive"]
    assert "command queuing" in a2[0]["reason"]
    a1 = judge(res, parse_label("A1"))
    assert [r["verdict"] for r in a1[:2]] == ["fails", "fails"]
    assert a1[0]["test"] == "rand_read_4k_q1t1"   # q1 used when q32 is absent
    assert a1[2]["verdict"] == "inconclusive"     # no write test at all


def test_iops_from_bytes_when_runs_lack_ops():
    res = result_with(make_test("rand_read_4k_q1t1", [1600 * 4096] * 3))
    row = judge(res, parse_label("A1"))[0]
    assert row["measured"] == pytest.approx(1600) and row["verdict"] == "meets"


def test_marginal_pass_between_decimal_and_binary_mb():
    res = result_with(make_test("seq_write", [10.2 * M] * 3))
    row = one(judge(res, parse_label("C10")))
    assert row["verdict"] == "meets" and row["marginal"] is True
    assert "marginal" in row["reason"]


def test_every_row_carries_the_indicative_note():
    res = result_with(make_test("seq_write", [12 * M] * 3))
    rows = judge(res, parse_label("C10 U3 A1 4x UDMA7 VPG-20 95MB/s read"))
    assert rows and all(r["note"] == INDICATIVE_NOTE for r in rows)
    assert "CMD20" in INDICATIVE_NOTE and "AU alignment" in INDICATIVE_NOTE and "bus clock" in INDICATIVE_NOTE
    assert "indicative, not compliance" in INDICATIVE_NOTE


# --- inconclusive --------------------------------------------------------------------------

def test_not_run_is_inconclusive():
    row = one(judge(result_with(make_test("cold_read", [50 * M] * 3)), parse_label("C10")))
    assert row["verdict"] == "inconclusive" and row["test"] is None and row["measured"] is None
    assert "not measured" in row["reason"]


def test_requirement_above_the_path_ceiling_is_inconclusive():
    # 90 MB/s write and V60 cannot be shown through USB 2.0 usb-storage (43 MB/s at best)
    res = result_with(make_test("seq_write", [20 * M] * 3), reader=USB2)
    for label in ("90MB/s write", "V60"):
        row = one(judge(res, parse_label(label)))
        assert row["verdict"] == "inconclusive", label
        assert "cannot show" in row["reason"] and "USB 2.0" in row["reason"]
    # the same figure without a known reader fails
    row = one(judge(result_with(make_test("seq_write", [20 * M] * 3)), parse_label("V60")))
    assert row["verdict"] == "fails"


def test_reader_limited_shortfall_is_inconclusive_but_a_slow_one_fails():
    # 266x = 39.9 MB/s: below the 43 MB/s line, so the path could show it...
    at_ceiling = result_with(make_test("cold_read", [34 * M] * 3), reader=USB2)
    row = one(judge(at_ceiling, parse_label("266x")), "read")
    assert row["verdict"] == "inconclusive"
    assert "ceiling" in row["reason"] and "may be faster" in row["reason"]
    # ...but a card reading 25 MB/s is well below the zone: it fails
    slow = result_with(make_test("cold_read", [25 * M] * 3), reader=USB2)
    assert one(judge(slow, parse_label("266x")), "read")["verdict"] == "fails"


def test_limited_by_mark_counts_as_reader_limited():
    res = result_with(make_test("seq_write", [8 * M] * 3))
    res.tests[0].limited_by = "limited by the reader (observed)"
    row = one(judge(res, parse_label("C10"), ceilings={}))
    assert row["verdict"] == "inconclusive" and row["limited_by"] == "limited by the reader (observed)"


def test_wide_spread_straddling_the_requirement_is_inconclusive():
    res = result_with(make_test("seq_write", [8 * M, 12 * M, 10.5 * M, 9.5 * M]))
    row = one(judge(res, parse_label("C10")))
    assert row["verdict"] == "inconclusive"
    lo, hi = row["ci95"]
    assert lo < 10 * M < hi
    assert "spread too wide" in row["reason"]


def test_a_spread_too_wide_is_inconclusive_even_when_the_runs_all_pass():
    """Issue 24: a noisy path (29-47% spread) was judged; its runs all clear C4 but disagree."""
    res = result_with(make_test("seq_write", [5 * M, 7.2 * M, 9.8 * M]))
    row = one(judge(res, parse_label("C4")))
    assert row["verdict"] == "inconclusive" and "spread too wide to judge the label" in row["reason"]
    assert row["ci95"][0] > 0


def test_tight_spread_is_judged():
    res = result_with(make_test("seq_write", [10.9 * M, 11.0 * M, 11.1 * M]))
    row = one(judge(res, parse_label("C10")))
    assert row["verdict"] == "meets" and row["ci95"][0] > 10 * M


def test_figure_faster_than_the_link_is_inconclusive():
    res = result_with(make_test("seq_write", [60 * M] * 3), reader=USB2)
    row = one(judge(res, parse_label("U3")))
    assert row["verdict"] == "inconclusive" and "cache" in row["reason"]


def test_unknown_speed_reported_as_12_does_not_block():
    reader = Reader(name="r", link_speed_mbit=12.0, driver="usb-storage")
    res = result_with(make_test("seq_write", [20 * M] * 3), reader=reader)
    assert one(judge(res, parse_label("C10")))["verdict"] == "meets"


def test_native_sd_bus_ceiling_from_target():
    res = result_with(make_test("seq_write", [40 * M] * 3), reader=Reader(name="slot", transport="mmc"),
                      target={"sd_bus": {"mode": "sd uhs SDR50"}})
    row = one(judge(res, parse_label("V60")))
    assert row["verdict"] == "inconclusive" and "SDR50" in row["reason"]


def test_explicit_ceiling_argument_overrides_reader():
    res = result_with(make_test("seq_write", [20 * M] * 3))
    row = one(judge(res, parse_label("V60"), ceilings=path_ceiling(USB2)))
    assert row["verdict"] == "inconclusive"


def test_interface_claims_are_information_only():
    res = result_with(make_test("cold_read", [80 * M] * 3))
    rows = judge(res, parse_label("UDMA7 UHS-I"))
    assert [r["verdict"] for r in rows] == ["inconclusive", "inconclusive"]
    assert rows[0]["margin"] is None and "48%" in rows[0]["reason"]
    assert "does not promise" in rows[0]["reason"]


def test_mark_limits_then_judge_agree():
    res = result_with(make_test("cold_read", [33 * M] * 3), reader=USB2)
    mark_limits(res, path_ceiling(USB2))
    assert res.tests[0].limited_by
    row = one(judge(res, parse_label("95MB/s read")), "read")
    assert row["verdict"] == "inconclusive" and row["limited_by"] == res.tests[0].limited_by


def test_single_run_is_judged_with_spread_unknown():
    res = result_with(make_test("seq_write", [11 * M]))
    row = one(judge(res, parse_label("C10")))
    assert row["verdict"] == "meets" and row["ci95"] is None and "spread unknown" in row["reason"]
