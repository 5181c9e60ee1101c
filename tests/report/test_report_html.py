"""The HTML report: structure, charts as well-formed SVG, and a real headless Chromium render."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from cardbench.report.html import claimed_x, render_html
from cardbench.report.svg import nice_step
from cardbench_factories import make_result
from chromium_helpers import png_pixels

MB = 1_000_000
SVG_NS = "{http://www.w3.org/2000/svg}"


def drawer(curves=True):
    return [
        make_result(brand="Lexar", capacity=48 * MB, label="4X", write_times=(41.2, 41.5, 41.6), read_rate=3.6e6,
                    curves=curves),
        make_result(brand="SanDisk", capacity=64 * MB, label=None, write_times=(47.6, 47.8, 47.6), read_rate=1.9e6,
                    warnings=["slow first run"], limited_by="USB 2.0 reader"),
        make_result(brand="Kingston", capacity=2000 * MB, label="133x", write_times=(2.1, 2.2, 2.0),
                    read_rate=19.5e6, curves=curves),
        make_result(brand="PNY", capacity=128 * MB, label=None, write_times=(30.5,), read_rate=None, complete=False),
    ]


VERIFY = [{"schema": "cardbench.verify/1", "id": "v1", "verdict": "fake",
           "card": {"brand": "NoName", "capacity_bytes": 64_000_000_000}, "reader": {"name": "Generic"},
           "claimed_bytes": 64_000_000_000, "usable_bytes": 7_800_000_000, "finished_at": "2024-05-02T10:00:00Z"}]


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)]


def test_claimed_x():
    assert claimed_x("4X") == 4
    assert claimed_x("133x") == 133
    assert claimed_x("C10 U1 x633") == 633
    assert claimed_x("Ultra 2.5 X") == 2.5
    assert claimed_x("Class 10") is None and claimed_x(None) is None and claimed_x("XD card") is None
    assert claimed_x("SDXC") is None


@pytest.mark.parametrize("span", [0.5, 1, 7, 9.99, 24, 133, 1000, 12345])
def test_nice_step(span):
    step = nice_step(span, 10)
    assert span / step <= 10 + 1e-9
    mantissa = step / 10 ** __import__("math").floor(__import__("math").log10(step))
    assert round(mantissa, 6) in (1, 2, 5)


def test_html_structure():
    rs = drawer()
    html = render_html(rs, VERIFY)
    assert html.startswith("<!DOCTYPE html>")
    p = _Collect()
    p.feed(html)
    tags = [t for t, _ in p.tags]
    assert "script" not in tags and "link" not in tags and "img" not in tags
    assert not re.search(r"(src|href)=\"https?:", html)
    assert "default-src 'none'" in html                       # CSP: no fetch, no script
    table = html.split('id="drawer-table"')[1].split("</table>")[0]
    assert table.count("<tr") == 1 + len(rs)
    assert "Write (MB/s)" in table and "Read (X)" in table and "INCOMPLETE" in table
    assert "limited by reader" in table and "1 warning" in table

    svgs = _svgs(html)
    ids = [s.get("id") for s in svgs]
    assert ids == ["write-chart", "read-chart", "position-chart", "sustained-chart"]
    write = svgs[0]
    bars = write.findall(f"{SVG_NS}rect[@class='bar']")
    assert len(bars) == 4                                       # PNY (incomplete) wrote but has no read
    assert len(svgs[1].findall(f"{SVG_NS}rect[@class='bar']")) == 3
    claims = write.findall(f"{SVG_NS}g[@class='claim']")
    assert len(claims) == 2                                     # Lexar 4X and Kingston 133x
    titles = [c.find(f"{SVG_NS}title").text for c in claims]
    assert titles[0].startswith("label claims 4X") and titles[1].startswith("label claims 133X")
    grid_labels = [t.text for t in write.findall(f"{SVG_NS}text") if t.text and re.fullmatch(r"\d+X", t.text)]
    assert grid_labels[0] == "0X" and len(grid_labels) >= 3
    # the 133x claim is on the scale: gridlines reach past it
    assert max(int(t[:-1]) for t in grid_labels) >= 133

    # claim tick sits where 4X is on the axis
    def x_of(label):
        t = next(t for t in write.findall(f"{SVG_NS}text") if t.text == label)
        return float(t.get("x"))
    zero, step_label = x_of("0X"), grid_labels[1]
    px_per_x = (x_of(step_label) - zero) / int(step_label[:-1])
    tick = float(claims[0].find(f"{SVG_NS}line").get("x1"))
    assert tick == pytest.approx(zero + 4 * px_per_x, abs=0.6)

    pos = svgs[2]
    assert len(pos.findall(f"{SVG_NS}polyline")) == 2           # Lexar and Kingston have positions
    assert "Fake-capacity checks" in html and "7.8 GB" in html and "verdict-fake" in html
    assert "Readers" in html and "Reader ceilings" in html


def test_html_without_curves_or_results():
    html = render_html(drawer(curves=False))
    assert [s.get("id") for s in _svgs(html)] == ["write-chart", "read-chart"]
    assert "Fake-capacity checks" not in html
    empty = render_html([])
    assert "No results." in empty and "<svg" not in empty


def test_html_escapes_text():
    r = make_result(brand="<script>alert(1)</script>", label="4X & more")
    html = render_html([r])
    assert "<script>" not in html and "&lt;script&gt;" in html
    for svg in _svgs(html):
        assert svg is not None   # still well-formed XML with odd names


@pytest.mark.slow
def test_chromium_renders_report(chromium, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_html(drawer(), VERIFY), encoding="utf-8")
    shot = tmp_path / "report.png"
    dom, console = chromium.render(page, shot, width=1200, height=2000)
    assert console == [], "console messages while rendering the report:\n" + "\n".join(console)
    assert 'id="drawer-table"' in dom and dom.count("<svg") >= 2
    assert "Lexar" in dom and "Kingston" in dom
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1200, 2000)
    colours = set()
    dark = 0
    for row in rows[::8]:
        for i in range(0, len(row), 3 * 8):
            px = row[i:i + 3]
            colours.add(px)
            dark += sum(px) < 300
    assert len(colours) > 20, "the screenshot is (nearly) one colour"
    assert dark > 200, "no text or bars visible in the screenshot"
    # the blue write bars are drawn in the upper part of the page
    blue = sum(1 for row in rows[300:1000] for i in range(0, len(row), 3)
               if row[i] < 80 and 90 < row[i + 1] < 140 and row[i + 2] > 150)
    assert blue > 1000


@pytest.mark.slow
def test_chromium_console_check_catches_errors(chromium, tmp_path):
    """The console check is able to fail: a page with a script error is caught."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('boom'); nosuchfunction();</script>"
                    "</body></html>")
    _, console = chromium.render(page, tmp_path / "bad.png", width=400, height=300)
    assert any("boom" in c for c in console)
    assert any("nosuchfunction" in c for c in console)
