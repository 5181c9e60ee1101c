"""The cardbench.geometry/1 document and its record kind (rules tier)."""

from __future__ import annotations

from types import SimpleNamespace

from cardbench.devices.registers import decode_ssr
from cardbench.geometry.doc import SCHEMA, check_doc, new_doc, size_text
from cardbench.geometry.run import declared_au
from cardbench.kinds import kind_for_schema
from cardbench.kinds.geometry import summary
from cardbench.report.geometry import geometry_chart, geometry_section
from cardbench.result import Card


def found(**kw):
    return dict(new_doc(), allocation_unit_bytes=12 << 20, allocation_unit_confidence="high", page_bytes=16 << 10,
                page_confidence="low", **kw)


def test_a_new_document_says_nothing_found_and_is_well_formed():
    d = new_doc()
    assert d["schema"] == SCHEMA and check_doc(d) == []
    for key in ("allocation_unit_bytes", "page_bytes", "fat_units", "declared_au_bytes"):
        assert d[key] is None
    assert d["open_units"] == {"linear": None, "random": None}
    assert kind_for_schema(SCHEMA).name == "geometry"


def test_a_value_and_its_confidence_must_agree():
    assert check_doc(found()) == []
    assert check_doc(dict(found(), allocation_unit_confidence="none")) == [
        "'allocation_unit_confidence' must be \"none\" exactly when 'allocation_unit_bytes' is null"]
    assert "open_units_confidence.linear" in check_doc(dict(new_doc(), open_units={"linear": 2, "random": None}))[0]
    assert "one of high, low, none" in check_doc(dict(new_doc(), page_confidence="sure"))[0]
    assert "'allocation_unit_bytes' must be a number" in check_doc(dict(found(), allocation_unit_bytes="12M"))[0]


def test_a_card_on_a_native_sd_slot_keeps_its_registers_as_an_object():
    """A card read through mmc carries its SD registers (``card.sd``, an object, as ``card.ata``):
    its documents are well-formed, so they can be imported and sent to a station."""
    d = found(card=Card(serial="aa-XY-0xdeadbeef", sd={"raw": {"cid": "aa"}, "manufactured": "2006-02"}).to_dict())
    assert check_doc(d) == []
    d["card"]["sd"] = "aa-XY"
    assert check_doc(d) == ["'card.sd' must be an object"]


def test_summary_in_one_line():
    assert summary(new_doc()) == "geometry: no boundary found"
    d = found(open_units={"linear": 2, "random": 2}, open_units_confidence={"linear": "high", "random": "high"})
    assert summary(d) == "geometry: AU 12 MiB (high), page 16 KiB (low), 2 AUs open"
    assert size_text(1536 << 10) == "1.5 MiB" and size_text(None) == "-"


def test_the_declared_au_comes_from_the_sd_status_else_preferred_erase_size():
    """The SD Status when it was read (AU_SIZE 0: none), else sysfs preferred_erase_size."""
    ssr = bytearray(64)
    ssr[10] = 0xB0                     # AU_SIZE Bh = 12 MB [S12 §4.10.2.4]
    status = decode_ssr(ssr.hex())
    sd = SimpleNamespace(card=SimpleNamespace(status=status, preferred_erase_size=4 << 20))
    assert declared_au(sd) == (12 << 20, "SD Status AU_SIZE")
    # AU_SIZE 0: none declared; preferred_erase_size is then the kernel's guess from the capacity
    sd.card.status = decode_ssr(bytes(64).hex())
    assert declared_au(sd) == (None, "SD Status AU_SIZE 0")
    sd.card.status = None
    assert declared_au(sd) == (4 << 20, "sysfs preferred_erase_size")
    assert declared_au(SimpleNamespace(card=None)) == (None, None)


def test_the_html_chart_marks_the_au_boundaries_and_the_step():
    offsets = [k * (256 << 10) for k in range(1, 97)]
    costs = [(300e-6 if o % (4 << 20) == 0 else 150e-6) for o in offsets]
    d = found(device="/dev/sdb", message="AU 4 MiB (high confidence).", advice={"lines": ["partition 1 ... fix"]},
              timing={"au": {"offsets": offsets, "cost_seconds": costs, "finding": {"step": 150e-6}}})
    d["allocation_unit_bytes"] = 4 << 20
    svg = geometry_chart(d)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('fill="#b8322c"') == 96 // 16 and "stroke-dasharray" in svg and "AU 4 MiB marked" in svg
    html = geometry_section([d])
    assert "<h3>/dev/sdb</h3>" in html and "partition 1 ... fix" in html
    assert "no boundary found" in geometry_chart(dict(d, allocation_unit_bytes=None))
    assert "no timing recorded" in geometry_chart(new_doc())
