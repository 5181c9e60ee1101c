"""Who made a card, by its own registers: the packaged ``data/makers.toml`` (SD CID manufacturer
ids with their OEM ids, maker names in a CompactFlash card's ATA model string), with sources.

    sd_maker(0x03)                   -> {"maker": "SanDisk", "brands": [...], "oem": ["SD"], "sources": [...]}
    ata_maker("SanDisk SDCFH-004G")  -> ("SanDisk", ["SanDisk"])
    same_maker("sandisk ultra", ["SanDisk", "WD"]) -> True

Every mapping is a hint (SD-3C does not publish its ids; see the file's header).
"""

from __future__ import annotations

import functools
import re
import tomllib
from importlib import resources
from typing import Any

SCHEMA = "cardbench.makers/1"


@functools.lru_cache(maxsize=1)
def makers() -> dict[str, Any]:
    """The parsed ``cardbench/data/makers.toml`` (cached; read-only). Every entry cites known sources."""
    data = tomllib.loads(resources.files("cardbench").joinpath("data/makers.toml").read_text(encoding="utf-8"))
    if data.get("schema") != SCHEMA:
        raise ValueError(f"makers.toml: schema {data.get('schema')!r}, expected {SCHEMA!r}")
    known = set(data.get("sources", {}))
    for where, entry in [*(("sd_mid." + k, v) for k, v in data["sd_mid"].items()), ("ata_model", data["ata_model"])]:
        if not entry.get("sources") or not entry.get("note") or set(entry["sources"]) - known:
            raise ValueError(f"makers.toml: {where} lacks a note or known sources")
    return data


def sd_makers() -> dict[int, dict[str, Any]]:
    """SD CID manufacturer id -> its entry."""
    return {int(k, 16): v for k, v in makers()["sd_mid"].items()}


def sd_maker(mid: int) -> dict[str, Any] | None:
    return sd_makers().get(int(mid))


def _words(text: str) -> str:
    return " " + re.sub(r"[^a-z0-9]+", " ", text.lower()).strip() + " "


def ata_maker(model: str | None) -> tuple[str, list[str]] | None:
    """(maker, its names) when a word of a CF card's ATA model string names a maker in the table."""
    if not model:
        return None
    words = _words(model)
    for maker, names in makers()["ata_model"]["names"].items():
        if any(_words(n) in words for n in names):
            return maker.replace("_", " "), list(names)
    return None


def same_maker(brand: str, names: list[str]) -> bool:
    """Does the brand a person gave name one of ``names`` (word for word, any case)?"""
    words = _words(brand)
    return any(_words(n) in words for n in names)


def source_text(ids: list[str]) -> str:
    table = makers()["sources"]
    return "; ".join(f"[{i}] {table[i]}" for i in ids if i in table)
