"""parse_label, claims_from_ssr, label/register mismatches, and the packaged figures."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardbench.errors import UsageError
from cardbench.units import X_BYTES_PER_S, X_CDROM_BYTES_PER_S
from cardbench.verdicts.labels import (
    Claim,
    claims_from_ssr,
    label_register_mismatches,
    parse_label,
)
from cardbench.verdicts.ratings import ratings

M = 1_000_000


def summary(claims: list[Claim]) -> list[tuple]:
    return [(c.kind, c.name, [(k.direction, k.required, k.unit) for k in c.checks if k.primary]) for c in claims]


W = "write"
TABLE = [
    # (label, [(kind, name, [(direction, required, unit), ...primary checks])])
    ("4X", [("x", "4X", [("read", 600_000, "B/s")])]),
    ("133x", [("x", "133X", [("read", 19_950_000, "B/s")])]),
    ("4 X", [("x", "4X", [("read", 600_000, "B/s")])]),
    ("1066X", [("x", "1066X", [("read", 159_900_000, "B/s")])]),
    ("C10", [("speed_class", "C10", [(W, 10 * M, "B/s")])]),
    ("Class 10", [("speed_class", "C10", [(W, 10 * M, "B/s")])]),
    ("class4", [("speed_class", "C4", [(W, 4 * M, "B/s")])]),
    ("CL10", [("speed_class", "C10", [(W, 10 * M, "B/s")])]),
    ("c2", [("speed_class", "C2", [(W, 2 * M, "B/s")])]),
    ("C6", [("speed_class", "C6", [(W, 6 * M, "B/s")])]),
    ("U1", [("uhs_speed_class", "U1", [(W, 10 * M, "B/s")])]),
    ("u3", [("uhs_speed_class", "U3", [(W, 30 * M, "B/s")])]),
    ("UHS-I U3", [("sd_bus", "UHS-I", [("interface", 104 * M, "B/s")]),
                  ("uhs_speed_class", "U3", [(W, 30 * M, "B/s")])]),
    ("V6", [("video_speed_class", "V6", [(W, 6 * M, "B/s")])]),
    ("V30", [("video_speed_class", "V30", [(W, 30 * M, "B/s")])]),
    ("v90", [("video_speed_class", "V90", [(W, 90 * M, "B/s")])]),
    ("A1", [("app_class", "A1", [("random read", 1500, "IOPS"), ("random write", 500, "IOPS"),
                                 ("sustained write", 10 * M, "B/s")])]),
    ("A2", [("app_class", "A2", [("random read", 4000, "IOPS"), ("random write", 2000, "IOPS"),
                                 ("sustained write", 10 * M, "B/s")])]),
    ("E150", [("sd_express_speed_class", "E150", [(W, 150 * M, "B/s")])]),
    ("e600", [("sd_express_speed_class", "E600", [(W, 600 * M, "B/s")])]),
    ("UDMA7", [("udma", "UDMA7", [("interface", 167 * M, "B/s")])]),
    ("UDMA 6", [("udma", "UDMA6", [("interface", 133 * M, "B/s")])]),
    ("udma-0", [("udma", "UDMA0", [("interface", 16_700_000, "B/s")])]),
    ("VPG-20", [("vpg", "VPG-20", [("sustained write", 20 * M, "B/s")])]),
    ("VPG-65", [("vpg", "VPG-65", [("sustained write", 65 * M, "B/s")])]),
    ("VPG400", [("vpg", "VPG400", [("sustained write", 400 * M, "B/s")])]),
    ("vpg 200", [("vpg", "VPG200", [("sustained write", 200 * M, "B/s")])]),
    ("95MB/s read", [("rate", "95 MB/s read", [("read", 95 * M, "B/s")])]),
    ("90 MB/s write", [("rate", "90 MB/s write", [(W, 90 * M, "B/s")])]),
    ("up to 170MB/s", [("rate", "170 MB/s read", [("read", 170 * M, "B/s")])]),
    ("170MB/s", [("rate", "170 MB/s read", [("read", 170 * M, "B/s")])]),
    ("read 95 MB/s", [("rate", "95 MB/s read", [("read", 95 * M, "B/s")])]),
    ("write: up to 90MBps", [("rate", "90 MB/s write", [(W, 90 * M, "B/s")])]),
    ("20MiB/s write", [("rate", "20 MiB/s write", [(W, 20 * 1_048_576, "B/s")])]),
    ("95/90MB/s", [("rate", "95 MB/s read", [("read", 95 * M, "B/s")]),
                   ("rate", "90 MB/s write", [(W, 90 * M, "B/s")])]),
    ("SDXC", []),
    ("microSDHC CF", []),
    ("", []),
    ("   ", []),
    ("C10, U1;V10 and A1", [("speed_class", "C10", [(W, 10 * M, "B/s")]),
                            ("uhs_speed_class", "U1", [(W, 10 * M, "B/s")]),
                            ("video_speed_class", "V10", [(W, 10 * M, "B/s")]),
                            ("app_class", "A1", [("random read", 1500, "IOPS"), ("random write", 500, "IOPS"),
                                                 ("sustained write", 10 * M, "B/s")])]),
    ("C10 Class 10 c10", [("speed_class", "C10", [(W, 10 * M, "B/s")])]),   # duplicates dropped
]


@pytest.mark.parametrize("label,expected", TABLE, ids=[t[0] or "empty" for t in TABLE])
def test_parse_label_table(label, expected):
    assert summary(parse_label(label)) == expected


def test_claim_keeps_source_text():
    claims = parse_label("Class 10, 4 X, UDMA 6")
    assert [c.text for c in claims] == ["Class 10", "4 X", "UDMA 6"]


def test_x_judged_on_read_and_flags_write():
    (claim,) = parse_label("133x")
    read, write = claim.checks
    assert (read.direction, read.primary) == ("read", True)
    assert (write.direction, write.primary) == ("write", False)
    assert read.required == 133 * X_BYTES_PER_S
    assert read.alt_required == 133 * X_CDROM_BYTES_PER_S
    assert "cold_read" in read.tests and "seq_write" in write.tests


def test_sd_class_checks_sequential_write_and_a_class_uses_random_tests():
    (c10,) = parse_label("C10")
    assert c10.checks[0].tests[0] == "seq_write"
    assert c10.checks[0].marginal_band
    (a2,) = parse_label("A2")
    assert a2.checks[0].tests[0].startswith("rand_read_4k")
    assert a2.checks[1].tests[0].startswith("rand_write_4k")
    assert a2.checks[0].needs_command_queuing and not parse_label("A1")[0].checks[0].needs_command_queuing


def test_udma_is_an_interface_not_a_promise():
    (claim,) = parse_label("UDMA7")
    assert claim.checks[0].direction == "interface"
    assert "not promise" in claim.checks[0].meaning or "does not promise" in claim.checks[0].meaning


@pytest.mark.parametrize("label,token", [
    ("SanDisk", "SanDisk"), ("C10 Extreme", "Extreme"), ("C8", "C8"), ("U2", "U2"), ("V20", "V20"),
    ("A3", "A3"), ("E100", "E100"), ("UDMA8", "UDMA8"), ("VPG-30", "VPG-30"), ("UHS-IV", "UHS-IV"),
    ("C100", "C100"), ("64GB", "64GB"), ("100Mb/s", "100Mb/s"), ("0x", "0x"), ("0MB/s", "0MB/s"),
    ("95MB/s fast", "fast"), ("??", "??"),
])
def test_unknown_tokens_name_the_token(label, token):
    with pytest.raises(UsageError) as exc:
        parse_label(label)
    message = exc.value.message
    assert token in message
    assert "\n" not in message


def test_label_must_be_text():
    with pytest.raises(UsageError):
        parse_label(None)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_text_raises_only_usage_error(text):
    try:
        claims = parse_label(text)
    except UsageError as exc:
        assert exc.message and "\n" not in exc.message
    else:
        assert all(isinstance(c, Claim) and c.checks for c in claims)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="0123456789 .,;/+&xXcClLaAsSuUvVeEdDmMbBiIhHgGpPkKrRwWtTo-:", max_size=40))
def test_label_like_text_raises_only_usage_error(text):
    try:
        parse_label(text)
    except UsageError as exc:
        assert exc.message and "\n" not in exc.message


_TOKENS = st.sampled_from(["4x", "133X", "C10", "Class 4", "U1", "U3", "V30", "V6", "A1", "A2", "E300",
                           "UDMA 7", "VPG-65", "95MB/s read", "90 MB/s write", "SDXC", "UHS-II"])
_SEPS = st.sampled_from([" ", ", ", ";", " / ", " and ", "  ", "+"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_TOKENS, _SEPS), min_size=1, max_size=8), st.booleans())
def test_any_mix_of_known_tokens_parses(parts, upper):
    text = "".join(tok + sep for tok, sep in parts)
    text = text.upper() if upper else text.lower()
    claims = parse_label(text)
    distinct = {re.sub(r"\s", "", t.lower()) for t, _ in parts if t not in ("SDXC",)}
    assert len(claims) == len(distinct)


# --- register ----------------------------------------------------------------------------

def test_claims_from_ssr_names_and_ints():
    by_name = claims_from_ssr({"speed_class": "C10", "uhs_speed_grade": "U3", "video_speed_class": "V30",
                               "app_perf_class": "A2"})
    by_int = claims_from_ssr({"speed_class": 10, "uhs_speed_grade": 3, "video_speed_class": 30,
                              "app_perf_class": 2})
    assert [c.name for c in by_name] == ["C10", "U3", "V30", "A2"] == [c.name for c in by_int]
    assert all(c.origin == "register" for c in by_name)


def test_claims_from_ssr_none_zero_and_raw_codes():
    assert claims_from_ssr({"speed_class": 0, "uhs_speed_grade": None, "video_speed_class": "",
                            "app_perf_class": "none"}) == []
    assert [c.name for c in claims_from_ssr({"speed_class": 1})] == ["C2"]     # raw code 1
    assert [c.name for c in claims_from_ssr({"speed_class": 3})] == ["C6"]     # raw code 3
    assert claims_from_ssr({"uhs_speed_grade": 2}) == []                       # reserved code
    assert [c.name for c in claims_from_ssr({"video_speed_class": 30.0})] == ["V30"]


def test_claims_from_ssr_rejects_wrong_family():
    with pytest.raises(ValueError):
        claims_from_ssr({"uhs_speed_grade": "V30"})


def test_label_register_mismatch():
    label = parse_label("C10 U3 V30 A2")
    findings = label_register_mismatches(label, {"speed_class": "C10", "uhs_speed_grade": "U1",
                                                 "video_speed_class": 0, "app_perf_class": "A2"})
    assert len(findings) == 2
    assert any("U3" in f and "U1" in f for f in findings)
    assert any("V30" in f and "no Video Speed Class" in f for f in findings)


def test_label_register_agree_or_unknown_field():
    label = parse_label("C10 U3")
    assert label_register_mismatches(label, {"speed_class": 10, "uhs_speed_grade": 3}) == []
    # a family the register dict does not report is not compared
    assert label_register_mismatches(parse_label("V30"), {"speed_class": 10}) == []
    # a class the register declares but the label omits is not a mismatch
    assert label_register_mismatches(parse_label("C10"), {"speed_class": 10, "app_perf_class": 2}) == []


# --- the packaged figures ------------------------------------------------------------------

def test_packaged_figures_match_units_and_carry_sources():
    data = ratings()
    assert data["x"]["unit_bytes_per_s"] == X_BYTES_PER_S
    assert data["x"]["alt_unit_bytes_per_s"] == X_CDROM_BYTES_PER_S
    for name, entry in data["sd_class"].items():
        assert isinstance(entry["min_seq_write_bytes_per_s"], int), name
        assert entry["note"], name
    for section in ("sd_class", "sd_app_class", "cf_udma", "cf_vpg", "sd_bus_mode", "sd_bus_label"):
        for name, entry in data[section].items():
            assert "sources" in entry and "note" in entry, (section, name)
    usb2 = data["usb"]["480"]
    assert usb2["physical_bytes_per_s"] == 13 * 512 * 8000
    assert usb2["bot"]["limit_bytes_per_s"] == 43_000_000 and usb2["bot"]["typical_bytes_per_s"] == 35_000_000
