"""ATA IDENTIFY DEVICE: what a CompactFlash card (or any ATA device) says about itself.

A CF card is an ATA device. Behind a USB reader that implements SCSI/ATA Translation (SAT),
IDENTIFY DEVICE (ECh) is sent wrapped in an ATA PASS-THROUGH command over ``SG_IO``, as
``hdparm -I`` and sg3_utils' ``sg_sat_identify`` do: the 16-byte CDB (85h) first, the 12-byte one
(A1h) where the bridge refuses the 16-byte one. Both are PIO Data-In commands: nothing is written
to the card. A1h is BLANK on optical drives, so it is never sent to a SCSI device of type 5.

* :func:`decode_identify` reads the 512-byte block: raw bytes, or the hex-word text that
  ``hdparm --Istdout`` prints (and ``hdparm --Istdin`` reads). Bad input raises
  :class:`IdentifyError` with one line saying what is wrong.
* :func:`read_identify` asks a device, as root, bounded by a timeout (SG_IO's own timeout, and a
  worker thread abandoned when the call does not come back), and never raises for what a device
  does: it returns an :class:`AtaProbe` whose ``status`` says "answered", "not available" (not
  ATA behind SAT), "timed out", "needs root" or "failed", with the reason in words.

Sources (ids as in the project's reference notes and ``data/ratings.toml``):

* [S66] CF+ & CF Specification 4.1 as reprinted in SanDisk's CompactFlash OEM Product Manual
  (Rev. 12.0, 2007), Table 5-8 "Identify Device Information": word 0 = 848Ah for CompactFlash,
  words 7-8 sectors per card (MSW first), 10-19 serial (right justified), 23-26 firmware, 27-46
  model (left justified), strings "Big Endian Byte Order in Word"; word 160 CFA power mode 1;
  word 163 CF Advanced True IDE Timing Mode capability and setting; 164 PCMCIA timing modes.
* [S67] ATA/ATAPI-7 (T13 1532D) and ACS, as reprinted in drive manuals: word 49 capabilities
  (bit 8 DMA, bit 9 LBA), 51 PIO mode (bits 15-8, modes 0-2), 53 validity (bit 1: words 64-70,
  bit 2: word 88), 60-61 LBA sectors, 63 Multiword DMA (bits 2-0 supported, 10-8 selected),
  64 advanced PIO (bit 0 PIO 3, bit 1 PIO 4), 82-87 command sets, 88 Ultra DMA (bits 7-0
  supported, 15-8 selected), 100-103 48-bit sectors (when word 83 bit 10), 106 sector size,
  255 integrity word (signature A5h in bits 7-0, checksum in bits 15-8: all 512 bytes sum to 0).
* [S68] hdparm ``identify.c`` (Mark Lord): how it recognises a CFA device (word 0 = 848Ah or
  844Ah, or word 83 bit 2 "CFA feature set") and decodes word 163 (bits 2-0 the highest advanced
  PIO mode, 1 = PIO 5, 2 = PIO 6; bits 5-3 the highest advanced Multiword DMA mode, 1 = MDMA 3,
  2 = MDMA 4; bits 8-6 and 11-9 the selected ones) and word 160 (bit 15 valid, bit 13 power
  level 1 not supported, bit 12 its commands disabled, bits 11-0 the maximum current in mA).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import re
import stat
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from cardbench.engine.errors import cannot_use
from cardbench.errors import DeviceFault, EnvironmentMissing, TargetError, UsageError
from cardbench.signals import start_thread

BLOCK = 512                 # IDENTIFY DEVICE returns one 512-byte block: 256 little-endian words
WORDS = BLOCK // 2

#: general configuration (word 0) values of a CompactFlash card [S66][S68]
CF_SIGNATURES = frozenset({0x848A, 0x844A})

DEFAULT_TIMEOUT = 3.0       # seconds; a card answers IDENTIFY in milliseconds


class IdentifyError(UsageError, ValueError):
    """An IDENTIFY block that cannot be read (truncated, not hex, no CF/ATA signature)."""


# --- the decoded block ----------------------------------------------------------------------------


@dataclass
class Identify:
    """What an ATA device says in its IDENTIFY DEVICE data (see the module docstring for words).

    Strings are trimmed. ``sectors`` is the 48-bit count where the device has one, else the
    28-bit one; ``capacity_bytes`` is it times ``logical_sector_bytes``. Mode lists hold mode
    numbers; ``*_selected`` the one the host (the reader's bridge) set, None when none is.
    ``checksum`` is "valid", "bad" or "absent" (no A5h signature in word 255).
    """

    general_config: int
    is_cf: bool
    model: str
    serial: str
    firmware: str
    sectors_28: int
    sectors_48: int | None
    sectors_cf: int
    sectors: int
    logical_sector_bytes: int
    lba: bool
    dma: bool
    pio_modes: list[int]
    pio_selected: int | None
    mdma_modes: list[int]
    mdma_selected: int | None
    udma_modes: list[int]
    udma_selected: int | None
    cf_advanced: int
    cfa_power_mode1: dict[str, Any] | None
    features: list[str]
    checksum: str
    problems: list[str] = field(default_factory=list)

    @property
    def capacity_bytes(self) -> int:
        return self.sectors * self.logical_sector_bytes

    def identity(self) -> str:
        """model + serial + sectors: what tells two cards apart (two 256 MB cards of one make differ
        in serial)."""
        return f"ata:{self.model}|{self.serial}|{self.sectors}"

    def mode_in_use(self) -> tuple[str, int, bool]:
        """The transfer mode the card and the path use: (kind "UDMA" | "MDMA" | "PIO", number, selected).

        A selected Ultra DMA mode first, then a selected Multiword DMA mode (CF advanced modes
        included), then a selected CF advanced PIO mode; with nothing selected the path talks PIO,
        and the card's fastest PIO mode is the most it can be (``selected`` False: an upper bound,
        the reader may use a slower one).
        """
        if self.udma_selected is not None:
            return "UDMA", self.udma_selected, True
        if self.mdma_selected is not None:
            return "MDMA", self.mdma_selected, True
        if self.pio_selected is not None:
            return "PIO", self.pio_selected, True
        return "PIO", max(self.pio_modes) if self.pio_modes else 0, False

    def summary(self) -> dict[str, Any]:
        """What a result stores about the card: identity, capacity and modes (JSON-able)."""
        kind, number, selected = self.mode_in_use()
        return {"source": "ata-identify", "cf": self.is_cf, "model": self.model, "serial": self.serial,
                "firmware": self.firmware, "sectors": self.sectors, "capacity_bytes": self.capacity_bytes,
                "pio_modes": list(self.pio_modes), "pio_selected": self.pio_selected,
                "mdma_modes": list(self.mdma_modes), "mdma_selected": self.mdma_selected,
                "udma_modes": list(self.udma_modes), "udma_selected": self.udma_selected,
                "mode": {"kind": kind, "number": number, "selected": selected, "name": f"{kind} {number}"},
                "cfa_power_mode1": self.cfa_power_mode1, "checksum": self.checksum}

    def modes_text(self) -> str:
        """"UDMA 0-4 (4 in use), MDMA 0-2, PIO 0-4": for a person."""
        parts = []
        for kind, modes, sel in (("UDMA", self.udma_modes, self.udma_selected),
                                 ("MDMA", self.mdma_modes, self.mdma_selected),
                                 ("PIO", self.pio_modes, self.pio_selected)):
            if not modes:
                continue
            span = f"{kind} {modes[0]}" if len(modes) == 1 else f"{kind} {min(modes)}-{max(modes)}"
            parts.append(span + (f" ({sel} in use)" if sel is not None else ""))
        return ", ".join(parts) or "no transfer modes announced"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["capacity_bytes"] = self.capacity_bytes
        d["identity"] = self.identity()
        d["mode"] = self.summary()["mode"]
        return d


# --- reading the input ---------------------------------------------------------------------------

_HEX_WORD = re.compile(r"^[0-9a-fA-F]{4}$")
_DEVICE_HEADER = re.compile(r"^/dev/\S+:$")


def _words_from_text(text: str) -> list[int]:
    """256 words from ``hdparm --Istdout`` text: 4-hex-digit words, 8 per line; a ``/dev/sdX:``
    header line (hdparm prints one per device) and blank lines are allowed."""
    words: list[int] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or _DEVICE_HEADER.match(line):
            continue
        for token in line.split():
            token = token.removeprefix("0x").removeprefix("0X")
            if not _HEX_WORD.match(token):
                raise IdentifyError(f"IDENTIFY dump line {number} is not hex words ({raw.strip()[:40]!r}): "
                                    "expected the 4-digit words hdparm --Istdout prints")
            words.append(int(token, 16))
    if len(words) != WORDS:
        what = "truncated" if len(words) < WORDS else "too long"
        raise IdentifyError(f"IDENTIFY dump {what}: {len(words)} words, an IDENTIFY block is {WORDS} "
                            f"words ({BLOCK} bytes)")
    return words


def _words(data: bytes | bytearray | memoryview | str) -> list[int]:
    if isinstance(data, str):
        return _words_from_text(data)
    raw = bytes(data)
    if raw and all(32 <= b < 127 or b in (9, 10, 13) for b in raw[:64]) and len(raw) != BLOCK:
        return _words_from_text(raw.decode("ascii", errors="replace"))   # text given as bytes
    if len(raw) != BLOCK:
        what = "truncated" if len(raw) < BLOCK else "too long"
        raise IdentifyError(f"IDENTIFY block {what}: {len(raw)} bytes, an IDENTIFY block is {BLOCK} bytes")
    return [int.from_bytes(raw[i:i + 2], "little") for i in range(0, BLOCK, 2)]


def _string(words: list[int], start: int, count: int) -> str:
    """An ATA string: two characters per word, the first in the high byte [S66 "Big Endian Byte
    Order in Word"]; NULs dropped, spaces trimmed, non-printable bytes shown as ``\\xNN``."""
    out = []
    for w in words[start:start + count]:
        for b in (w >> 8, w & 0xFF):
            if b == 0:
                continue
            out.append(chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}")
    return "".join(out).strip()


def _valid(word: int) -> bool:
    """Words 83, 84, 87, 106...: defined only when bits 15-14 are 01 [S67]."""
    return (word & 0xC000) == 0x4000


def _bits_set(value: int, width: int) -> list[int]:
    return [i for i in range(width) if value & (1 << i)]


def _selected(value: int) -> int | None:
    """The one mode a select byte (high byte of words 63 / 88) marks, or None."""
    marks = _bits_set(value, 8)
    return marks[-1] if marks else None


#: (word, bit, name) of the command sets and features worth telling [S67][S68]
_FEATURES = (
    (82, 0, "SMART"), (82, 1, "security"), (82, 2, "removable media"), (82, 3, "power management"),
    (82, 5, "write cache"), (82, 6, "read look-ahead"), (83, 0, "DOWNLOAD MICROCODE"),
    (83, 2, "CFA feature set"), (83, 3, "advanced power management"), (83, 10, "48-bit LBA"),
    (83, 12, "FLUSH CACHE"), (83, 13, "FLUSH CACHE EXT"),
)


def _signature_problem(w0: int, w83: int) -> str | None:
    """Why a block is neither CF nor ATA, or None when word 0 says it is one [S67][S68]."""
    if w0 in CF_SIGNATURES or (_valid(w83) and w83 & 0x0004):
        return None
    if w0 == 0x0000 and w83 == 0:
        return "the IDENTIFY block is all zeros in its signature words: no device answered"
    if w0 == 0xFFFF:
        return "the IDENTIFY block's word 0 is FFFFh: no device answered (a floating bus)"
    if w0 in (0x8A84, 0x4A84):
        return (f"word 0 is {w0:04X}h, the CF signature 848Ah with its bytes swapped: give the words as "
                "hdparm --Istdout prints them (or the raw little-endian block)")
    if w0 & 0x8000:
        kind = "an ATAPI device (IDENTIFY PACKET DEVICE data)" if not w0 & 0x4000 else "not an ATA device"
        return f"no CF or ATA signature: word 0 is {w0:04X}h, {kind}, not a card's IDENTIFY DEVICE block"
    return None


def decode_identify(data: bytes | bytearray | memoryview | str) -> Identify:
    """Decode IDENTIFY DEVICE data: 512 bytes as the device sent them, or ``hdparm --Istdout`` text.

    Raises :class:`IdentifyError` (one line) for a truncated or overlong block, text that is not
    hex words, or a block without the CF or ATA signature in word 0. A bad checksum is not an
    error: ``checksum`` says "bad" and ``problems`` says why, so a caller can decide.
    """
    w = _words(data)
    problem = _signature_problem(w[0], w[83])
    if problem:
        raise IdentifyError(problem)
    raw = b"".join(x.to_bytes(2, "little") for x in w)
    problems: list[str] = []
    # word 255: integrity, signature A5h in bits 7-0, checksum in 15-8 [S67]
    if w[255] & 0xFF == 0xA5:
        if sum(raw) % 256 == 0:
            checksum = "valid"
        else:
            checksum = "bad"
            problems.append(f"word 255 checksum is wrong (bytes sum to {sum(raw) % 256:02X}h, not 00h): "
                            "the block was damaged on its way")
    else:
        checksum = "absent"
    is_cf = w[0] in CF_SIGNATURES or (_valid(w[83]) and bool(w[83] & 0x0004))
    w53 = w[53]
    # PIO: word 51 bits 15-8 give modes 0-2 (older devices); word 64 bits 0-1 PIO 3-4 when word 53
    # bit 1 says words 64-70 are valid [S67]; CF advanced PIO 5-6 in word 163 bits 2-0 [S66][S68]
    pio = list(range(0, min(w[51] >> 8, 2) + 1))
    if w53 & 0x0002 and w[64] & 0xFF:
        pio = [0, 1, 2] + [3 + i for i in _bits_set(w[64] & 0x03, 2)]
    w163 = w[163] if is_cf else 0
    adv_pio, adv_mdma = w163 & 0x7, (w163 >> 3) & 0x7
    if adv_pio in (1, 2):
        pio += [5, 6][:adv_pio]
    sel = (w163 >> 6) & 0x7
    pio_selected = 4 + sel if adv_pio in (1, 2) and 1 <= sel <= adv_pio else None
    # Multiword DMA: word 63 bits 2-0 supported, 10-8 selected [S67]; CF MDMA 3-4 in word 163 [S66][S68]
    dma = bool(w[49] & 0x0100)
    mdma = _bits_set(w[63] & 0x07, 3)
    if mdma:
        mdma = list(range(0, max(mdma) + 1))       # mode n implies the modes below it [S67]
    mdma_selected = _selected((w[63] >> 8) & 0x07)
    if adv_mdma in (1, 2):
        mdma = sorted(set(mdma) | {0, 1, 2} | set([3, 4][:adv_mdma]))
        sel = (w163 >> 9) & 0x7
        if 1 <= sel <= adv_mdma:
            mdma_selected = 2 + sel
    # Ultra DMA: word 88, valid when word 53 bit 2 [S67]
    udma: list[int] = []
    udma_selected = None
    if w53 & 0x0004 and w[88]:
        udma = _bits_set(w[88] & 0xFF, 8)
        udma_selected = _selected(w[88] >> 8)
    # sectors: 28-bit (60-61), 48-bit (100-103, when word 83 bit 10), CF words 7-8 (MSW first) [S66][S67]
    sectors_28 = w[60] | (w[61] << 16)
    sectors_48 = None
    if _valid(w[83]) and w[83] & 0x0400:
        sectors_48 = w[100] | (w[101] << 16) | (w[102] << 32) | (w[103] << 48)
    sectors_cf = (w[7] << 16) | w[8] if is_cf else 0
    sectors = sectors_48 or sectors_28 or sectors_cf
    # word 106: logical sector size in words 117-118 when bit 12 is set [S67]
    sector_bytes = 512
    if _valid(w[106]) and w[106] & 0x1000 and (w[117] or w[118]):
        sector_bytes = 2 * (w[117] | (w[118] << 16))
    # word 160: CFA power mode 1 [S66][S68]
    power = None
    if is_cf and w[160] & 0x8000:
        power = {"supported": not w[160] & 0x2000, "commands_disabled": bool(w[160] & 0x1000),
                 "max_current_ma": (w[160] & 0x0FFF) or None}
    features = [name for word, bit, name in _FEATURES if _valid(w[83]) and w[word] & (1 << bit)]
    if power is not None and power["supported"]:
        features.append("CFA power mode 1")
    if is_cf and w[162] not in (0, 0xFFFF) and w[162] & 1:
        features.append("CPRM key management")
    if w[169] not in (0, 0xFFFF) and w[169] & 1:
        features.append("TRIM")
    model = _string(w, 27, 20)
    if not model:
        problems.append("the model string (words 27-46) is empty")
    if not sectors:
        problems.append("the device announces no sectors (words 60-61, 100-103 and 7-8 are zero)")
    return Identify(
        general_config=w[0], is_cf=is_cf, model=model, serial=_string(w, 10, 10),
        firmware=_string(w, 23, 4), sectors_28=sectors_28, sectors_48=sectors_48, sectors_cf=sectors_cf,
        sectors=sectors, logical_sector_bytes=sector_bytes, lba=bool(w[49] & 0x0200), dma=dma,
        pio_modes=pio, pio_selected=pio_selected, mdma_modes=mdma, mdma_selected=mdma_selected,
        udma_modes=udma, udma_selected=udma_selected, cf_advanced=w163, cfa_power_mode1=power,
        features=features, checksum=checksum, problems=problems,
    )


def hdparm_text(data: bytes) -> str:
    """A 512-byte block as ``hdparm --Istdout`` prints it (8 hex words per line)."""
    w = _words(data)
    return "\n".join(" ".join(f"{x:04x}" for x in w[i:i + 8]) for i in range(0, WORDS, 8)) + "\n"


# --- asking a device: SG_IO with ATA PASS-THROUGH -------------------------------------------------

SG_IO = 0x2285
SG_DXFER_FROM_DEV = -3
ATA_IDENTIFY_DEVICE = 0xEC
#: PIO Data-In (protocol 4), data from the device, length in the sector count field, in blocks
_PROTO_PIO_IN = 4 << 1
_T_FLAGS = 0x08 | 0x04 | 0x02     # T_DIR=1 (from device), BYT_BLOK=1, T_LENGTH=2 (sector count)
CHECK_CONDITION = 0x02


class _SgIoHdr(ctypes.Structure):
    """``struct sg_io_hdr`` (include/scsi/sg.h), interface 'S'."""

    _fields_ = [
        ("interface_id", ctypes.c_int), ("dxfer_direction", ctypes.c_int), ("cmd_len", ctypes.c_ubyte),
        ("mx_sb_len", ctypes.c_ubyte), ("iovec_count", ctypes.c_ushort), ("dxfer_len", ctypes.c_uint),
        ("dxferp", ctypes.c_void_p), ("cmdp", ctypes.c_void_p), ("sbp", ctypes.c_void_p),
        ("timeout", ctypes.c_uint), ("flags", ctypes.c_uint), ("pack_id", ctypes.c_int),
        ("usr_ptr", ctypes.c_void_p), ("status", ctypes.c_ubyte), ("masked_status", ctypes.c_ubyte),
        ("msg_status", ctypes.c_ubyte), ("sb_len_wr", ctypes.c_ubyte), ("host_status", ctypes.c_ushort),
        ("driver_status", ctypes.c_ushort), ("resid", ctypes.c_int), ("duration", ctypes.c_uint),
        ("info", ctypes.c_uint),
    ]


def identify_cdb(length: int) -> bytes:
    """The ATA PASS-THROUGH (16) [85h] or (12) [A1h] CDB carrying IDENTIFY DEVICE (SAT, as in
    hdparm's sgio.c and sg3_utils' sg_sat_identify): one 512-byte block, PIO Data-In."""
    if length == 16:
        cdb = bytearray(16)
        cdb[0], cdb[1], cdb[2] = 0x85, _PROTO_PIO_IN, _T_FLAGS
        cdb[6] = 1                      # sector count (7:0)
        cdb[14] = ATA_IDENTIFY_DEVICE
        return bytes(cdb)
    if length == 12:
        cdb = bytearray(12)
        cdb[0], cdb[1], cdb[2] = 0xA1, _PROTO_PIO_IN, _T_FLAGS
        cdb[4] = 1
        cdb[9] = ATA_IDENTIFY_DEVICE
        return bytes(cdb)
    raise ValueError(f"no ATA PASS-THROUGH of {length} bytes")


@dataclass
class AtaProbe:
    """What asking a device for its IDENTIFY data gave.

    ``status``: "answered" (``identify`` is set), "not available" (not ATA: no SCSI pass-through,
    or the bridge refuses ATA PASS-THROUGH: a loop device, an SD reader...), "timed out",
    "needs root", "failed" (an error on the way). ``reason`` says it in words.
    """

    device: str
    status: str
    reason: str
    identify: Identify | None = None
    command: str | None = None
    seconds: float = 0.0

    @property
    def answered(self) -> bool:
        return self.identify is not None

    def to_dict(self, *, full: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {"device": self.device, "status": self.status, "reason": self.reason,
                             "command": self.command, "seconds": round(self.seconds, 4)}
        if full:
            d["identify"] = self.identify.to_dict() if self.identify else None
        return d


class _NotSat(Exception):
    """The device or bridge does not take this ATA PASS-THROUGH."""


def _sense_text(sense: bytes) -> tuple[int, int, int]:
    """(sense key, ASC, ASCQ) from fixed (70h/71h) or descriptor (72h/73h) sense data."""
    if len(sense) < 4:
        return 0, 0, 0
    code = sense[0] & 0x7F
    if code in (0x72, 0x73):
        return sense[1] & 0x0F, sense[2], sense[3]
    if len(sense) >= 14:
        return sense[2] & 0x0F, sense[12], sense[13]
    return sense[2] & 0x0F, 0, 0


def _ata_status(sense: bytes) -> int | None:
    """The ATA status register from the ATA Status Return descriptor (09h) of descriptor sense."""
    if len(sense) < 8 or (sense[0] & 0x7F) not in (0x72, 0x73):
        return None
    i, end = 8, 8 + sense[7]
    while i + 1 < min(end, len(sense)):
        kind, length = sense[i], sense[i + 1]
        if kind == 0x09 and i + 13 < len(sense):
            return sense[i + 13]
        i += 2 + length
    return None


def _sg_identify(fd: int, length: int, timeout_ms: int) -> bytes:
    """One IDENTIFY DEVICE through ATA PASS-THROUGH (``length`` 16 or 12); the 512 bytes, or
    _NotSat / OSError."""
    cdb = ctypes.create_string_buffer(identify_cdb(length), length)
    data = ctypes.create_string_buffer(BLOCK)
    sense = ctypes.create_string_buffer(64)
    hdr = _SgIoHdr(interface_id=ord("S"), dxfer_direction=SG_DXFER_FROM_DEV, cmd_len=length, mx_sb_len=64,
                   dxfer_len=BLOCK, dxferp=ctypes.cast(data, ctypes.c_void_p),
                   cmdp=ctypes.cast(cdb, ctypes.c_void_p), sbp=ctypes.cast(sense, ctypes.c_void_p),
                   timeout=timeout_ms)
    fcntl.ioctl(fd, SG_IO, hdr)
    sb = sense.raw[:hdr.sb_len_wr]
    if hdr.host_status or (hdr.driver_status & ~0x08):     # DRIVER_SENSE (08h) alone is fine
        raise _NotSat(f"the path failed the command (host status {hdr.host_status:#x}, "
                      f"driver status {hdr.driver_status:#x})")
    if hdr.status == CHECK_CONDITION or sb:
        key, asc, ascq = _sense_text(sb)
        ata = _ata_status(sb)
        if ata is not None and ata & 0x01:
            raise _NotSat(f"the device aborted IDENTIFY DEVICE (ATA status {ata:#04x}): not an ATA disk or card")
        # RECOVERED ERROR / "ATA pass-through information available" (00h/1Dh) is success [SAT]
        if not (key in (0x0, 0x1) and (asc, ascq) in ((0x00, 0x1D), (0x00, 0x00))):
            if key == 0x5:
                raise _NotSat(f"the bridge refuses ATA PASS-THROUGH ({length}) (illegal request, "
                              f"ASC {asc:02X}h/{ascq:02X}h)")
            raise _NotSat(f"the command failed (sense key {key:X}h, ASC {asc:02X}h/{ascq:02X}h)")
    elif hdr.status:
        raise _NotSat(f"the device answered SCSI status {hdr.status:#04x}")
    got = BLOCK - max(hdr.resid, 0)
    if got < BLOCK:
        raise _NotSat(f"only {got} of {BLOCK} bytes came back")
    return data.raw


def _scsi_type(st: os.stat_result) -> int | None:
    """The SCSI peripheral type of a block device (0 disk, 5 CD/DVD...), from sysfs."""
    try:
        link = f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}/device/type"
        with open(link, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


_NOT_SG = (errno.ENOTTY, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENXIO)


def _probe(path: str, timeout: float) -> AtaProbe:
    """The probe itself (run in a worker thread by :func:`read_identify`)."""
    start = time.monotonic()

    def done(status: str, reason: str, ident: Identify | None = None, command: str | None = None) -> AtaProbe:
        return AtaProbe(path, status, reason, ident, command, time.monotonic() - start)

    # open first, then look at what was opened: the one place a stalled path can block is inside
    # this worker (open, fstat and the ioctl), never in the caller
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return done("not available", f"not ATA: {path} does not exist")
    except OSError as e:
        return done("failed", f"cannot open {path}: {e.strerror or e}")
    try:
        st = os.fstat(fd)
        if not (stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            return done("not available", f"not ATA: {path} is not a device")
        scsi_type = _scsi_type(st) if stat.S_ISBLK(st.st_mode) else None
        lengths = (16,) if scsi_type == 5 else (16, 12)    # A1h is BLANK on optical drives: never
        refused = []
        for length in lengths:
            try:
                raw = _sg_identify(fd, length, max(1, int(timeout * 1000)))
            except OSError as e:
                if e.errno in _NOT_SG:
                    return done("not available", f"not ATA: {path} takes no SCSI pass-through "
                                                 f"(SG_IO: {os.strerror(e.errno)})")
                if e.errno in (errno.ETIMEDOUT, errno.EIO) and length == 16:
                    refused.append(f"ATA PASS-THROUGH (16): {os.strerror(e.errno)}")
                    continue
                return done("failed", f"SG_IO on {path} failed: {os.strerror(e.errno or 0)}")
            except _NotSat as e:
                refused.append(str(e))
                continue
            command = f"ATA PASS-THROUGH ({length})"
            try:
                ident = decode_identify(raw)
            except IdentifyError as e:
                return done("not available", f"not ATA: {command} answered, but {e.message}", command=command)
            reason = "answered IDENTIFY DEVICE" + (f"; {'; '.join(ident.problems)}" if ident.problems else "")
            return done("answered", reason, ident, command)
        return done("not available", "not ATA behind SAT: " + "; ".join(refused))
    finally:
        os.close(fd)


def read_identify(path: str, timeout: float = DEFAULT_TIMEOUT) -> AtaProbe:
    """Ask the device at ``path`` for its IDENTIFY DEVICE data (root only; nothing is written).

    Bounded by ``timeout`` seconds twice over: SG_IO's own timeout field, and a worker thread
    that is abandoned (left to finish on its own) when the call has not come back shortly after,
    so a stalled bridge costs the caller ``timeout`` and the rest of the command goes on. A device
    that is not ATA behind SAT is "not available" at once (a loop device: SG_IO is refused).
    """
    if os.geteuid() != 0:
        return AtaProbe(path, "needs root", "reading a card's IDENTIFY data needs root (SG_IO ATA PASS-THROUGH)")
    box: list[AtaProbe] = []

    def work() -> None:
        try:
            box.append(_probe(path, timeout))
        except Exception as e:   # a bug must not kill the caller's command: say it instead
            box.append(AtaProbe(path, "failed", f"IDENTIFY failed: {type(e).__name__}: {e}"))

    start = time.monotonic()
    worker = threading.Thread(target=work, name=f"ata-identify {path}", daemon=True)
    start_thread(worker)
    worker.join(timeout + 0.5)
    if box:
        return box[0]
    return AtaProbe(path, "timed out", f"{path} did not answer IDENTIFY DEVICE within {timeout:g} s; "
                                       "abandoned (the card or its reader stalls)", seconds=time.monotonic() - start)


def identify_from(source: str, timeout: float = DEFAULT_TIMEOUT, *, stdin: Any = None) -> Identify:
    """The IDENTIFY data ``source`` names: a device (asked with :func:`read_identify`), a file
    holding a dump (512 raw bytes or ``hdparm --Istdout`` text), or "-" for a dump on stdin.

    Raises one-line errors: :class:`IdentifyError` for a dump that cannot be read, TargetError for
    a missing file or a device that is not ATA behind SAT, EnvironmentMissing without root,
    DeviceFault when the device stalls or fails.
    """
    if source == "-":
        stream = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise UsageError("no standard input to read an IDENTIFY dump from (give a file or a device)")
        try:
            data = stream.read(64 * 1024)
        except (OSError, ValueError) as e:  # closed, or not readable (pytest's captured stdin)
            raise UsageError(f"cannot read an IDENTIFY dump from standard input: {e}") from None
        return decode_identify(data)
    try:
        st = os.stat(source)     # a device, a character device (sg) or a dump file
    except OSError as e:
        raise cannot_use(e, source) from None
    if stat.S_ISBLK(st.st_mode) or stat.S_ISCHR(st.st_mode):
        probe = read_identify(source, timeout)
        if probe.identify is not None:
            return probe.identify
        kind = {"needs root": EnvironmentMissing, "not available": TargetError}.get(probe.status, DeviceFault)
        raise kind(f"{source}: {probe.reason}")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{source} is neither a device nor a file with an IDENTIFY dump")
    if st.st_size > 64 * 1024:
        raise IdentifyError(f"{source} is {st.st_size} bytes: not an IDENTIFY dump (512 bytes, or hdparm "
                            "--Istdout text)")
    try:
        with open(source, "rb") as f:
            return decode_identify(f.read())
    except OSError as e:
        raise TargetError(f"cannot read {source}: {e.strerror or e}") from None
