"""The figures behind label checks and path ceilings, from the packaged ``data/ratings.toml``.

Every figure there is an integer in bytes per second (or IOPS) with its sources ([S..] ids of
the project's reference notes, listed in the file's ``[sources]`` table) and a note. This module
only loads and checks the file; it never looks anywhere else.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Any

SCHEMA = "cardbench.ratings/1"


class RatingsDataError(RuntimeError):
    """The packaged ratings file is missing an entry or a field (a packaging bug, not a user error)."""


@functools.lru_cache(maxsize=1)
def ratings() -> dict[str, Any]:
    """The parsed ``cardbench/data/ratings.toml`` (cached; treat it as read-only)."""
    text = resources.files("cardbench").joinpath("data/ratings.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    _check(data)
    return data


def _entries(data: dict[str, Any]):
    """Every leaf entry that must carry sources and a note."""
    for section in ("x", "limits", "units"):
        yield section, data[section]
    for section in ("sd_class", "sd_app_class", "sd_bus_label", "sd_bus_mode", "cf_udma", "cf_pio", "cf_mdma",
                    "cf_vpg"):
        for name, entry in data[section].items():
            yield f"{section}.{name}", entry
    for speed, entry in data["usb"].items():
        yield f"usb.{speed}", entry
        for proto in ("bot", "uas"):
            yield f"usb.{speed}.{proto}", entry[proto]


def _check(data: dict[str, Any]) -> None:
    if data.get("schema") != SCHEMA:
        raise RatingsDataError(f"ratings.toml: schema {data.get('schema')!r}, expected {SCHEMA!r}")
    known = set(data.get("sources", {}))
    try:
        for where, entry in _entries(data):
            if "note" not in entry or "sources" not in entry:
                raise RatingsDataError(f"ratings.toml: {where} lacks sources or note")
            missing = [s for s in entry["sources"] if s not in known]
            if missing:
                raise RatingsDataError(f"ratings.toml: {where} cites unknown sources {missing}")
    except KeyError as exc:
        raise RatingsDataError(f"ratings.toml: missing section {exc}") from None


def sources_text(ids: list[str] | tuple[str, ...]) -> str:
    """"[S12][S13]" for a list of ids (empty string for none)."""
    return "".join(f"[{i}]" for i in ids)
