"""reader_ceilings(): many different cards hitting the same wall through one reader."""

from __future__ import annotations

import pytest

from cardbench.result import Card, Reader, Result
from cardbench.verdicts.readers import reader_ceilings
from verdicts_helpers import make_test

M = 1_000_000
USB2_READER = Reader(name="USB 2.0 reader")

# The classic survey: (card, write MB/s, read MB/s) through one USB 2.0 reader.
SURVEY = [("Lexar 48M", 1.013, 3.6), ("SanDisk 64M", 0.881, 1.9), ("PNY 128M", 1.378, 3.8),
          ("SanDisk 128M", 1.804, 3.8), ("PNY 256M", 1.580, 3.8), ("SanDisk 256M", 2.370, 3.7),
          ("Crucial 256M", 4.348, 3.8), ("Lexar 512M", 3.479, 4.2), ("SanDisk Ultra II 1024M", 4.897, 4.9)]


def card_result(name: str, write_mb: float | None, read_mb: float | None, reader: Reader = USB2_READER,
                read_test: str = "cold_read") -> Result:
    tests = []
    if write_mb is not None:
        tests.append(make_test("seq_write", [write_mb * M] * 3))
    if read_mb is not None:
        tests.append(make_test(read_test, [read_mb * M] * 3))
    return Result(target={"kind": "directory"}, card=Card(name=name), reader=reader, tests=tests)


def survey(rows=SURVEY, reader=USB2_READER):
    return [card_result(n, w, r, reader) for n, w, r in rows]


def finding(entry, direction):
    (f,) = [f for f in entry["findings"] if f["direction"] == direction]
    return f


def test_classic_survey_names_a_possible_read_ceiling():
    (entry,) = reader_ceilings(survey())
    assert entry["identity"] == USB2_READER.identity() and entry["name"] == "USB 2.0 reader"
    assert entry["cards"] == 9
    assert entry["direction"] == "read"
    assert entry["ceiling_bytes_per_s"] == pytest.approx(3.8 * M)
    # 3.7 and 3.8 lie within 3% of each other; 3.6 is 5.6% below 3.8 and stays out
    assert entry["cards_at_ceiling"] == 5
    # two cards read faster through the same reader: a plateau, not a hard limit
    assert entry["confidence"] == "possible"
    read = finding(entry, "read")
    assert read["cards_above"] == 2
    assert sorted(read["members"]) == sorted(["PNY 128M", "SanDisk 128M", "PNY 256M", "SanDisk 256M",
                                              "Crucial 256M"])
    assert read["other_spread"] == pytest.approx(4.348 / 1.378)
    ev = entry["evidence"]
    assert "5 of 9 cards read at 3.7-3.8 MB/s" in ev
    assert "Lexar 512M 4.2 MB/s" in ev and "SanDisk Ultra II 1024M 4.9 MB/s" in ev
    assert "Lexar 48M 3.6 MB/s" in ev     # named as just below the window
    assert "not a hard limit" in ev


def test_classic_survey_writes_name_no_ceiling():
    (entry,) = reader_ceilings(survey())
    write = finding(entry, "write")
    assert write["confidence"] == "none" and write["ceiling_bytes_per_s"] is None
    assert "differ" in write["evidence"]


def test_survey_without_the_faster_cards_is_likely():
    rows = [r for r in SURVEY if r[2] < 4.0]
    (entry,) = reader_ceilings(survey(rows))
    assert entry["confidence"] == "likely"
    assert entry["cards"] == 7 and entry["cards_at_ceiling"] == 5
    assert entry["ceiling_bytes_per_s"] == pytest.approx(3.8 * M)


def test_wider_tolerance_takes_in_the_3_6_card():
    rows = [r for r in SURVEY if r[2] < 4.0]
    (entry,) = reader_ceilings(survey(rows), tolerance=0.06)
    assert entry["cards_at_ceiling"] == 6


def test_reader_where_all_cards_differ_names_nothing():
    rows = [("a", 1.0, 2.0), ("b", 2.0, 5.0), ("c", 3.0, 9.0), ("d", 4.0, 14.0), ("e", 5.0, 20.0)]
    (entry,) = reader_ceilings(survey(rows))
    assert entry["confidence"] == "none" and entry["ceiling_bytes_per_s"] is None
    assert entry["cards_at_ceiling"] == 0
    assert "read:" in entry["evidence"] and "write:" in entry["evidence"]


def test_alike_cards_are_only_possible():
    rows = [("a", 10.0, 20.0), ("b", 10.2, 20.2), ("c", 10.1, 20.1), ("d", 5.0, 12.0)]
    entry = reader_ceilings(survey(rows))[0]
    read = finding(entry, "read")
    assert read["confidence"] == "possible" and "alike" in read["evidence"]


def test_write_ceiling_when_reads_differ():
    rows = [("a", 9.0, 20.0), ("b", 9.1, 35.0), ("c", 8.95, 60.0), ("d", 3.0, 15.0)]
    (entry,) = reader_ceilings(survey(rows))
    assert entry["direction"] == "write" and entry["confidence"] == "likely"
    assert entry["ceiling_bytes_per_s"] == pytest.approx(9.0 * M)
    assert entry["cards_at_ceiling"] == 3
    assert finding(entry, "read")["confidence"] == "none"


def test_fewer_than_three_cards():
    (entry,) = reader_ceilings(survey(SURVEY[2:4]))
    assert entry["confidence"] == "none" and "at least 3" in entry["evidence"]


def test_repeated_results_of_one_card_count_once_with_its_best_median():
    results = survey([r for r in SURVEY if r[2] < 4.0])
    # the same PNY 128M measured again, slower: its best read stays 3.8
    results.append(card_result("PNY 128M", 1.0, 2.0))
    # raw_read counts as a read test too
    results.append(card_result("Crucial 256M", None, 3.75, read_test="raw_read"))
    (entry,) = reader_ceilings(results)
    assert entry["cards"] == 7 and entry["cards_at_ceiling"] == 5


def test_page_cache_figures_and_incomplete_tests_are_ignored():
    rows = [r for r in SURVEY if r[2] < 4.0]
    results = survey(rows)
    cached = card_result("Cached 1G", 2.0, 30_000.0)          # 30 GB/s: the page cache
    partial = card_result("Partial 2G", 2.5, 50.0)
    partial.tests[1].complete = False
    (entry,) = reader_ceilings(results + [cached, partial])
    assert entry["confidence"] == "likely" and finding(entry, "read")["cards_above"] == 0


def test_readers_are_grouped_by_identity():
    other = Reader(name="USB 3 reader", vendor_id="05e3", product_id="0749", serial="X1")
    rows = [("a", 1.0, 2.0), ("b", 2.0, 5.0), ("c", 3.0, 9.0)]
    entries = reader_ceilings(survey() + survey(rows, reader=other))
    assert [e["identity"] for e in entries] == [USB2_READER.identity(), "usb:05e3:0749:X1"]
    assert [e["cards"] for e in entries] == [9, 3]
    assert entries[1]["confidence"] == "none"


def test_empty_store():
    assert reader_ceilings([]) == []
