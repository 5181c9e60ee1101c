"""check_result(): what a finished run gets (the runner calls it), and register comparisons."""

from __future__ import annotations

from cardbench.result import Card, Reader
from cardbench.verdicts import check_result, claims_from_ssr
from verdicts_helpers import make_test, result_with

M = 1_000_000
USB2 = Reader(name="r", link_speed_mbit=480.0, driver="usb-storage", transport="usb")


def test_check_result_marks_limits_and_judges_the_label():
    res = result_with(make_test("seq_write", [12 * M] * 3), make_test("cold_read", [33 * M] * 3),
                      reader=USB2, card=Card(name="x", label="C10 266x"))
    check_result(res)
    read = res.test("cold_read")
    assert read.limited_by and "USB 2.0 usb-storage" in read.limited_by
    verdicts = {(c["name"], c["direction"]): c["verdict"] for c in res.claims}
    assert verdicts == {("C10", "write"): "meets", ("266X", "read"): "inconclusive", ("266X", "write"): "fails"}


def test_check_result_without_label_leaves_claims_empty_and_flags_cache():
    res = result_with(make_test("cold_read", [30_000 * M] * 3), reader=USB2)
    check_result(res)
    assert res.claims == []
    warnings = res.test("cold_read").warnings
    assert any("page cache" in w for w in warnings) and any("implausible" in w for w in warnings)


def test_check_result_bad_label_becomes_a_warning():
    res = result_with(make_test("seq_write", [12 * M] * 3), card=Card(label="C10 turbo"))
    check_result(res)
    assert res.claims == [] and any("turbo" in w for w in res.warnings)


def test_check_result_with_register_reports_mismatch_and_judges_both():
    res = result_with(make_test("seq_write", [12 * M] * 3), card=Card(label="U3"))
    ssr = {"speed_class": "C10", "speed_class_code": 4, "uhs_speed_grade": "U1", "uhs_speed_grade_code": 1,
           "video_speed_class": None, "app_perf_class": "reserved(5)", "app_perf_class_code": 5}
    check_result(res, ssr=ssr)
    assert {(c["name"], c["origin"], c["verdict"]) for c in res.claims} == {
        ("U3", "label", "fails"), ("C10", "register", "meets"), ("U1", "register", "meets")}
    assert any("label says U3" in w and "U1" in w for w in res.warnings)


def test_reserved_register_values_are_skipped():
    assert claims_from_ssr({"speed_class": "reserved(7)", "app_perf_class": "reserved(5)"}) == []
