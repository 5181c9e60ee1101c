"""Where a pull test puts its records on the card, and what each 4 KiB block of a record says.

The card (a whole device, destroyed)::

    0                  label: magic, the test's UUID, the layout (JSON), a CRC
    4 KiB              the old region: 4 KiB records written and verified at the start, never
                       rewritten (unless a pull damaged them): damage there is old data damaged
    next MiB           the small area: 4 KiB slots, written in a random order (each slot once
                       per pass, so no slot is written twice within one pass)
    next MiB           the large area: 1 MiB slots, written in turn (sequential)

Every 4 KiB block of a record starts with a header: magic, the card's UUID, the record number, the
generation (the cycle it was written in), the record's address, the block's index and count, and a
CRC-32 of the whole block (random payload). A block read back is thus either a block of one known
record, intact, or not (torn inside the block, another card's, zeros): :func:`read_block`.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import asdict, dataclass
from typing import Any

KiB = 1 << 10
MiB = 1 << 20
BLOCK = 4 * KiB
SMALL = BLOCK
LARGE = MiB
LABEL_MAGIC = b"CBPULLT\x01"
BLOCK_MAGIC = b"CBPULLR\x01"
#: magic, uuid, record number, generation, address, block index, blocks, crc
HEADER = struct.Struct("<8s16sQIQHHI")
_CRC_AT = HEADER.size - 4
LABEL = struct.Struct("<8s16sII")   # magic, uuid, crc of the JSON, JSON length


def _up(x: int, align: int) -> int:
    return -(-x // align) * align


@dataclass(frozen=True)
class Layout:
    """Byte ranges of a pull test on a device of ``size`` bytes (see the module docstring)."""

    size: int
    old_bytes: int
    small_slots: int
    large_slots: int

    @classmethod
    def for_size(cls, size: int) -> Layout:
        """The default: old region min(8 MiB, size/16), small area min(16 MiB, size/16),
        large area min(64 MiB, size/4), at least 2 large slots."""
        old = max(BLOCK, min(8 * MiB, size // 16) // BLOCK * BLOCK)
        small = max(16, min(16 * MiB, size // 16) // SMALL)
        large = max(2, min(64 * MiB, size // 4) // LARGE)
        return cls(size, old, small, large)

    @property
    def old_start(self) -> int:
        return BLOCK

    @property
    def small_start(self) -> int:
        return _up(self.old_start + self.old_bytes, MiB)

    @property
    def large_start(self) -> int:
        return _up(self.small_start + self.small_slots * SMALL, MiB)

    @property
    def end(self) -> int:
        return self.large_start + self.large_slots * LARGE

    def check(self) -> str | None:
        """Why this layout cannot be used (None if it can)."""
        if self.old_bytes < BLOCK or self.old_bytes % BLOCK or self.small_slots < 1 or self.large_slots < 1:
            return "a layout needs an old region of whole 4 KiB blocks, and at least one small and one large slot"
        if self.end > self.size:
            return f"the device is too small for the test's layout ({self.end} B needed, {self.size} B there)"
        return None

    def old_addrs(self) -> list[int]:
        return list(range(self.old_start, self.old_start + self.old_bytes, BLOCK))

    def small_addr(self, slot: int) -> int:
        return self.small_start + slot * SMALL

    def large_addr(self, slot: int) -> int:
        return self.large_start + slot * LARGE

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def make_record(buf, uuid: bytes, number: int, generation: int, address: int) -> None:
    """Fill ``buf`` (a multiple of 4 KiB) with record ``number``: random payload, a header per block."""
    n = len(buf)
    blocks = n // BLOCK
    buf[:] = os.urandom(n)
    view = memoryview(buf)
    for i in range(blocks):
        off = i * BLOCK
        HEADER.pack_into(buf, off, BLOCK_MAGIC, uuid, number, generation, address, i, blocks, 0)
        crc = zlib.crc32(view[off + HEADER.size:off + BLOCK], zlib.crc32(view[off:off + _CRC_AT]))
        struct.pack_into("<I", buf, off + _CRC_AT, crc)


def read_block(block, uuid: bytes, address: int, index: int) -> int | None:
    """The record number a 4 KiB block read at ``address`` (block ``index`` of its record) holds
    intact, or None (another card's, torn inside, zeros, damaged)."""
    view = memoryview(block)
    magic, card, number, _gen, addr, idx, _blocks, crc = HEADER.unpack_from(view, 0)
    if magic != BLOCK_MAGIC or card != uuid or addr != address or idx != index:
        return None
    if zlib.crc32(view[HEADER.size:BLOCK], zlib.crc32(view[:_CRC_AT])) != crc:
        return None
    return number


def make_label(buf, uuid: bytes, info: dict[str, Any]) -> None:
    """Block 0: the label that finds the card again (:func:`read_label`)."""
    text = json.dumps(info, sort_keys=True).encode()
    if LABEL.size + len(text) > len(buf):
        raise ValueError("pull test label too long")
    buf[:] = bytes(len(buf))
    LABEL.pack_into(buf, 0, LABEL_MAGIC, uuid, zlib.crc32(text), len(text))
    buf[LABEL.size:LABEL.size + len(text)] = text


def read_label(block) -> tuple[str, dict[str, Any]] | None:
    """(UUID hex, info) of a pull test's label, or None if ``block`` is not one."""
    view = bytes(block[:BLOCK])
    magic, uuid, crc, length = LABEL.unpack_from(view, 0)
    if magic != LABEL_MAGIC or length > BLOCK - LABEL.size:
        return None
    text = view[LABEL.size:LABEL.size + length]
    if zlib.crc32(text) != crc:
        return None
    try:
        return uuid.hex(), json.loads(text)
    except ValueError:
        return None
