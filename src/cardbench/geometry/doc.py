"""The ``cardbench.geometry/1`` document (what ``cardbench geometry --json`` prints).

Fields scripts read (each found value has a sibling ``..._confidence``: "high", "low", or
"none" when nothing was found and the value is null):

allocation_unit_bytes   the AU found in the read timing (null: no boundary found)
page_bytes              the page found (the smaller step), or null
open_units              {"linear": N, "random": N}: AUs the card keeps open (--write; else null)
open_units_confidence   {"linear": ..., "random": ...}
fat_units               how many first AUs are FAT-tuned (--write; 0: none; null: not tested)
declared_au_bytes       the AU the card declares (SD Status AU_SIZE, else sysfs
                        preferred_erase_size; null behind a USB reader, and when the SD Status
                        says AU_SIZE 0: the kernel's preferred_erase_size is then its guess);
                        ``declared_au_source``
timing_agrees           true/false when both a found and a declared AU exist, else null
message                 the answer in one sentence; ``advice`` {lines, commands, partitions...}
method                  how it was measured; ``timing`` the raw costs per boundary (seconds), so
                        every figure can be recomputed; ``write`` the write pass's times
"""

from __future__ import annotations

import uuid
from typing import Any

from cardbench import __version__
from cardbench.kinds.geometry import SCHEMA, problem
from cardbench.result import host_info, now_iso
from cardbench.units import fmt_size

__all__ = ["SCHEMA", "check_doc", "new_doc", "size_text"]


def size_text(n: int | None) -> str:
    """A binary size as people write AUs: "4 MiB", "1.5 MiB", "16 KiB" ("-" for None)."""
    return "-" if n is None else fmt_size(n, True).replace(".0 ", " ")


def new_doc() -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "id": uuid.uuid4().hex,
        "started_at": now_iso(),
        "finished_at": None,
        "device": None,
        "size_bytes": None,
        "card": None,
        "reader": None,
        "allocation_unit_bytes": None,
        "allocation_unit_confidence": "none",
        "page_bytes": None,
        "page_confidence": "none",
        "open_units": {"linear": None, "random": None},
        "open_units_confidence": {"linear": "none", "random": "none"},
        "fat_units": None,
        "fat_units_confidence": "none",
        "declared_au_bytes": None,
        "declared_au_confidence": "none",
        "declared_au_source": None,
        "timing_agrees": None,
        "message": None,
        "notes": [],
        "advice": None,
        "method": {},
        "timing": {},
        "write": None,
        "seconds": None,
        "complete": False,
        "error": None,
        "tool": {"name": "cardbench", "version": __version__},
        "host": host_info(),
    }


def check_doc(doc: dict[str, Any]) -> list[str]:
    """What is wrong with a geometry document's shape (empty when it is right): the kind's check
    (:func:`cardbench.kinds.geometry.problem`), which the store and import apply too."""
    if doc.get("schema") != SCHEMA:
        return [f"schema is not {SCHEMA}"]
    found = problem(doc)
    return [found] if found else []
