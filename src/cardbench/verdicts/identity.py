"""Does the card's own register name the maker the person gave (``--brand``)?

An SD card's CID names its manufacturer (MID) and OEM (OID) (``result.target["cid"]``, read on a
native slot: :mod:`cardbench.devices.identity`); a CompactFlash card's ATA IDENTIFY model string
often starts with its maker's name (``Card.ata["model"]``). :func:`identity_check` compares them
with the brand, using the packaged table :mod:`cardbench.devices.makers` (``data/makers.toml``,
every id with its source):

* ``agrees``: the register's maker is the brand; nothing said;
* ``differs``: one plain line (also a result warning): which maker the card reports, that
  rebranding is common, that a mismatch with a known maker's id is a sign of a fake;
* ``unknown``: the id is not in the table (SD-3C publishes none): said, and not a warning;
* None: no register to ask (a card behind a USB reader shows no CID), or no brand given.
"""

from __future__ import annotations

from typing import Any

from cardbench.devices.makers import ata_maker, same_maker, sd_maker

REBRANDING = ("rebranding is common (a brand sells cards another maker made), but a mismatch with a known "
              "maker's id is a sign of a fake")


def identity_check(card: Any, target: dict[str, Any] | None) -> dict[str, Any] | None:
    """``{"status", "maker", "register", "sources", "text"}`` for a card (``Card``) and its
    result's ``target``; None when there is nothing to compare (see the module docstring)."""
    brand = (getattr(card, "brand", None) or "").strip()
    if not brand:
        return None
    cid = (target or {}).get("cid") if isinstance((target or {}).get("cid"), dict) else None
    ata = getattr(card, "ata", None) or {}
    if cid and str(cid.get("card_type") or "SD").upper() != "MMC" and cid.get("manufacturer_id") is not None:
        mid, oid = int(cid["manufacturer_id"]), str(cid.get("oem_id") or "")
        entry = sd_maker(mid)
        found = (entry["maker"], entry["brands"], list(entry["sources"])) if entry else None
        return _judge(brand, f"SD CID manufacturer id 0x{mid:02x}, OEM id {oid!r}", found,
                      "is not in cardbench's table of makers (SD-3C does not publish them)")
    model = ata.get("model") if isinstance(ata, dict) else None
    if model:
        named = ata_maker(model)
        return _judge(brand, f"ATA model {str(model).strip()!r}", (*named, ["S67"]) if named else None,
                      "names no maker cardbench knows")
    return None


def _judge(brand: str, register: str, found: tuple[str, list[str], list[str]] | None, unknown: str) -> dict[str, Any]:
    """The check of one register: ``found`` is (maker, the names it sells under, sources) or None."""
    if found is None:
        return {"status": "unknown", "maker": None, "register": register, "sources": [],
                "text": f"identity: the card's {register} {unknown}, so whether it is a {brand} card cannot be "
                        "told from it"}
    maker, names, sources = found
    if same_maker(brand, names):
        return {"status": "agrees", "maker": maker, "register": register, "sources": sources,
                "text": f"identity: the card's {register} names {maker}, as its brand {brand} does"}
    return {"status": "differs", "maker": maker, "register": register, "sources": sources,
            "text": f"identity: the card reports its maker as {maker} ({register}), not {brand}: {REBRANDING} "
                    f"[{', '.join(sources)}]"}


def apply_identity_check(result: Any) -> dict[str, Any] | None:
    """Put :func:`identity_check` into ``result.target["identity_check"]``, and a ``differs`` line
    into ``result.warnings`` (once); returns the check."""
    target = result.target if isinstance(result.target, dict) else None
    check = identity_check(result.card, target)
    if target is not None:
        if check is None:
            target.pop("identity_check", None)
        else:
            target["identity_check"] = check
    if check is not None and check["status"] == "differs" and check["text"] not in result.warnings:
        result.warnings.append(check["text"])
    return check
