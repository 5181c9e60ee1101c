"""Issue 31: what a person sees of endurance runs: the chart (rate and bad sectors against rounds,
milestones marked, several cards on one chart), `cardbench report --html` from a real SQLite store,
a real headless Chromium render of it, and the text of one run."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from cardbench.record import record
from cardbench.report.endurance import endurance_chart, render_endurance
from cardbench.report.html import render_html
from cardbench_factories import cli_ok, make_endurance, make_result
from chromium_helpers import png_pixels

NS = "{http://www.w3.org/2000/svg}"


def three():
    return [make_endurance(brand="SanDisk", rounds=40, serial="0x01", read_fade=0.004, rated_tbw=0.002),
            make_endurance(brand="Lenovo", rounds=18, first_error=6, growth=4.0, ended="bad_limit", serial="0x02",
                           capacity=64_000_000, write_rate=12e6, read_rate=30e6),
            make_endurance(brand="NoName", rounds=9, first_error=2, growth=9.0, ended="bad_limit", serial="0x03",
                           bad_class="erased", write_rate=8e6, read_rate=18e6)]


def _classes(svg: ET.Element, tag: str) -> list[str]:
    return [e.get("class") or "" for e in svg.iter(NS + tag)]


def test_one_chart_holds_every_card_with_its_milestones_marked():
    docs = three()
    svg = ET.fromstring(endurance_chart(docs))
    lines = _classes(svg, "polyline")
    assert lines.count("rate write") == 3 and lines.count("rate read") == 3 and lines.count("bad total") == 3
    assert not [c for c in lines if c.startswith("bad class-")]          # classes are drawn for one card alone
    marks = [g for g in svg.iter(NS + "g") if g.get("class") == "milestone"]
    # one mark per round a milestone was reached in (25% and 50% share a round on both worn cards)
    rounds = sum(len({m["round"] for m in d["milestones"]}) for d in docs)
    assert len(marks) == rounds and rounds >= 9
    titles = " ".join(g.find(NS + "title").text for g in marks)
    assert "Lenovo 64.0 MB Endurance, round 6: first error" in titles
    assert "25% bad" in titles and "50% bad" in titles
    text = " ".join(t.text or "" for t in svg.iter(NS + "text"))
    for card in ("SanDisk 32.0 MB Endurance", "Lenovo 64.0 MB Endurance", "NoName 32.0 MB Endurance"):
        assert card in text
    assert "rate (MB/s)" in text and "0.0001%" in text and "100%" in text
    # the worn card's bad line climbs: its last point is higher (smaller y) than its first error's
    bad = [p for p in svg.iter(NS + "polyline") if p.get("class") == "bad total"][1]
    ys = [float(pt.split(",")[1]) for pt in bad.get("points").split()]
    assert ys[-1] < ys[5] < ys[0]


def test_one_card_alone_shows_its_classes_beside_the_total():
    d = three()[1]
    d["rounds"][10]["bad_sectors"]["corrupt"] = 40
    svg = ET.fromstring(endurance_chart([d]))
    lines = _classes(svg, "polyline")
    assert "bad class-stale" in lines and "bad class-corrupt" in lines and "bad class-foreign" not in lines


def test_no_round_finished_draws_no_chart():
    d = make_endurance(rounds=1)
    d["rounds"] = []
    assert endurance_chart([d]) == ""


def test_the_text_of_one_run():
    d = make_endurance(brand="Lenovo", rounds=12, first_error=4, growth=10.0, ended="bad_limit", rated_tbw=0.01)
    text = render_endurance(d)
    assert text.splitlines()[0].startswith("Lenovo 32.0 MB Endurance: first error after 3 full writes")
    assert "rated for 0.01 TBW (10.0 GB): it wrote 3.84% of that before its first error" in text
    assert "first error  round 4, 128.0 MB written" in text and "ended: bad limit" in text
    assert max(len(x) for x in text.splitlines()[1:]) <= 80


@pytest.mark.slow
def test_report_html_from_a_real_store_renders_in_chromium(tmp_path, capsys, chromium, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    db = tmp_path / "a.db"
    docs = three()
    assert record([make_result(brand="SanDisk", capacity=32_000_000), *docs], db).stored
    page = tmp_path / "r.html"
    cli_ok(capsys, "report", "--db", db, "--html", page)
    html = page.read_text()
    assert '<section id="endurance">' in html and html.count('class="chart endurance-chart"') == 1
    for d in docs:
        assert d["answer"] in html
    assert "rated for 0.002 TBW" in html
    for svg in re.findall(r"<svg\b.*?</svg>", html, flags=re.S):
        ET.fromstring(svg)
    shot = tmp_path / "r.png"
    dom, console = chromium.render(page, shot, width=1100, height=2400)
    assert console == [], console
    assert "endurance-chart" in dom
    width, height, rows = png_pixels(shot)
    # the three cards' colours (blue, orange, green lines) are drawn
    def count(pred):
        return sum(1 for row in rows for i in range(0, len(row), 3) if pred(row[i], row[i + 1], row[i + 2]))
    assert count(lambda r, g, b: r > 200 and 100 < g < 140 and b < 60) > 300      # orange #d9731a
    assert count(lambda r, g, b: r < 70 and 120 < g < 150 and 70 < b < 100) > 300  # green #2e8b57


def test_a_report_of_endurance_alone_has_the_section():
    html = render_html([], endurance_docs=three()[:1])
    assert "Endurance: how long does it last?" in html and "No results." in html
    assert "with no error" in html


def test_report_markdown_lists_endurance_runs_below_the_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    db = tmp_path / "a.db"
    d = make_endurance(brand="Lenovo", first_error=3, rounds=8, growth=9.0)
    assert record([make_result(), d], db).stored
    md = cli_ok(capsys, "report", "--db", db)
    assert md.index("| Lexar") < md.index("endurance runs (1):") and f"| endurance: {d['answer']} |" in md
    assert "endurance runs" not in cli_ok(capsys, "report", "--db", db, "--format", "csv")


@pytest.mark.slow
def test_any_document_the_kind_takes_is_drawn_never_an_internal_error():
    """1,000 mangled documents (a value of another type anywhere, a key dropped): each the kind's
    check takes is drawn by the chart, the section and the text (a station server's card page
    shows what any station uploaded)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from cardbench.kinds.endurance import problem
    from cardbench.report.endurance import endurance_section
    from cardbench_factories import key_paths, mangled

    good = make_endurance(rounds=6, first_error=2, growth=30.0, rated_tbw=0.001)
    values = st.one_of(st.none(), st.booleans(), st.integers(-2, 2 ** 40), st.floats(-1, 1e13), st.text(max_size=4),
                       st.just([]), st.just({}), st.just("drop"))
    taken = []

    @settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.sampled_from(key_paths(good)[1:]), values)
    def case(path, value):
        d = mangled(good, path, value)
        if problem(d) is not None:
            return
        taken.append(path)
        svg = endurance_chart([d, good])
        if svg:
            ET.fromstring(svg)
        endurance_section([d])
        render_endurance(d)
    case()
    assert len(taken) > 100
