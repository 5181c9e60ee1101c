"""Issue 25: the card's own register (SD CID, CF ATA model) against the brand given (rules on models)."""

from __future__ import annotations

from cardbench.devices.makers import makers, sd_maker
from cardbench.devices.registers import SD_MANUFACTURER_HINTS
from cardbench.result import Card, Result
from cardbench.verdicts import check_result
from cardbench.verdicts.identity import identity_check


def _cid(mid: int, oid: str = "SD") -> dict:
    return {"cid": {"card_type": "SD", "manufacturer_id": mid, "oem_id": oid, "product_name": "SU08G"}}


def test_a_cid_naming_another_maker_gets_one_plain_line():
    check = identity_check(Card(brand="Kingston"), _cid(0x03))
    assert check["status"] == "differs" and check["maker"] == "SanDisk"
    text = check["text"]
    assert "reports its maker as SanDisk" in text and "manufacturer id 0x03" in text and "'SD'" in text
    assert "rebranding is common" in text and "sign of a fake" in text and "[S42, S64]" in text
    r = Result(target=_cid(0x03), card=Card(brand="Kingston", label="4X"))
    check_result(r)
    check_result(r)                                   # judged again: still one line
    assert [w for w in r.warnings if w.startswith("identity:")] == [text]
    assert r.target["identity_check"]["status"] == "differs"


def test_the_same_maker_and_unknown_ids_are_no_warning():
    assert identity_check(Card(brand="SanDisk Ultra"), _cid(0x03))["status"] == "agrees"
    assert identity_check(Card(brand="Toshiba"), _cid(0x02, "TM"))["status"] == "agrees"
    unknown = identity_check(Card(brand="Acme"), _cid(0x7B, "XY"))
    assert unknown["status"] == "unknown" and "not in cardbench's table" in unknown["text"]
    r = Result(target=_cid(0x7B, "XY"), card=Card(brand="Acme"))
    check_result(r)
    assert not any(w.startswith("identity:") for w in r.warnings)
    assert r.target["identity_check"]["status"] == "unknown"
    # nothing to compare: no brand, no register (a card behind a USB reader shows no CID), an MMC card
    assert identity_check(Card(), _cid(0x03)) is None
    assert identity_check(Card(brand="Kingston"), {}) is None
    assert identity_check(Card(brand="Kingston"), {"cid": dict(_cid(0x03)["cid"], card_type="MMC")}) is None


def test_a_cf_card_s_ata_model_against_its_brand():
    fake = identity_check(Card(brand="Lexar", ata={"model": "SanDisk SDCFH-004G"}), {})
    assert fake["status"] == "differs" and fake["maker"] == "SanDisk" and "ATA model 'SanDisk SDCFH-004G'" in fake["text"]
    assert identity_check(Card(brand="lexar", ata={"model": "LEXAR ATA FLASH CARD"}), {})["status"] == "agrees"
    plain = identity_check(Card(brand="Lexar", ata={"model": "CF CARD"}), {})
    assert plain["status"] == "unknown" and "names no maker" in plain["text"]


def test_the_table_cites_its_sources_and_feeds_the_cid_decoder():
    data = makers()
    for mid, entry in data["sd_mid"].items():
        assert entry["sources"] and all(s in data["sources"] for s in entry["sources"]), mid
    assert sd_maker(0x03)["oem"] == ["SD"] and SD_MANUFACTURER_HINTS[0x03] == "SanDisk"


def test_the_answer_says_a_difference_as_a_warning_and_an_unknown_id_plainly():
    from cardbench.report.answer import verdict_lines
    differs = Result(target=_cid(0x03), card=Card(brand="Kingston"))
    check_result(differs)
    assert any(ln.startswith("Warning: identity: the card reports its maker as SanDisk") for ln in verdict_lines(differs))
    unknown = Result(target=_cid(0x7B, "XY"), card=Card(brand="Acme"))
    check_result(unknown)
    lines = verdict_lines(unknown)
    assert any(ln.startswith("identity: the card's SD CID manufacturer id 0x7b") for ln in lines)
    assert not any("Warning: identity" in ln for ln in lines)
