"""Decode the SD/MMC card registers Linux exposes under ``/sys/block/mmcblkN/device/``.

Only a native SD/MMC host shows these; a USB card reader intercepts the commands that read them
[S41]. Sources (ids as in the project's reference notes, "standards.md"):

* [S12] SD Physical Layer Simplified Specification 4.10, CID/CSD/SD Status layouts (p104-105).
* [S34] Linux ``Documentation/driver-api/mmc/mmc-dev-attrs.rst`` (attribute formats).
* [S35] Linux ``drivers/mmc/core/sd.c``: ``cid``/``csd`` print four 32-bit words as ``%08x``,
  ``ssr`` sixteen, most significant bit first; ``mmc_decode_csd`` capacity formulas.
* [S42] mmc-utils ``lsmmc`` manufacturer table, [S64] kernel ``CID_MANFID_*``, [S65] a card catalog.
* [S59] SD Status decoders (byte offsets of the class fields).

Every decoder takes the hex string exactly as sysfs prints it and raises ``ValueError`` with a
one-line reason when it is not a register of the right length. The tables below are copied from
the reference notes so nothing reads them at run time.

What these registers cannot tell: the *real* capacity. A counterfeit card's controller announces
the fake size in its CSD, so only write/verify tests can find it (standards.md §4.3).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from cardbench.devices.makers import sd_makers

# --- tables (copied from ratings.toml / standards.md) --------------------------------------

#: SD Status AU_SIZE / UHS_AU_SIZE code -> bytes [S12 §4.10.2.4, ratings.toml sd.au_size_code_bytes].
AU_SIZE_BYTES: dict[int, int] = {
    0x1: 16 * 1024, 0x2: 32 * 1024, 0x3: 64 * 1024, 0x4: 128 * 1024, 0x5: 256 * 1024,
    0x6: 512 * 1024, 0x7: 1 << 20, 0x8: 2 << 20, 0x9: 4 << 20, 0xA: 8 << 20, 0xB: 12 << 20,
    0xC: 16 << 20, 0xD: 24 << 20, 0xE: 32 << 20, 0xF: 64 << 20,
}

#: SPEED_CLASS code -> class name [S12 p104]. Code 0 is "Class 0" (no class declared).
SPEED_CLASS_NAMES: dict[int, str] = {1: "C2", 2: "C4", 3: "C6", 4: "C10"}

#: UHS_SPEED_GRADE code -> name. Code meanings come from decoders, not spec text (standards.md §2.5).
UHS_GRADE_NAMES: dict[int, str] = {1: "U1", 3: "U3"}

#: VIDEO_SPEED_CLASS values that name a class: the byte is the V number itself (8 bits, 391:384).
VIDEO_CLASSES: frozenset[int] = frozenset({6, 10, 30, 60, 90})

#: APP_PERF_CLASS code -> name [S15].
APP_CLASS_NAMES: dict[int, str] = {1: "A1", 2: "A2"}

#: Capacity families by announced size, upper bounds in bytes [S12 p21, p140].
CAPACITY_FAMILIES: tuple[tuple[str, int], ...] = (
    ("SDSC", 2_147_483_648),
    ("SDHC", 34_359_738_368),
    ("SDXC", 2_199_023_255_552),
    ("SDUC", 140_737_488_355_328),
)

#: SD manufacturer ids (CID MID) -> maker, from the packaged data/makers.toml (with its sources).
#: SD-3C does not publish them and community tables disagree, so this is a *hint*, never proof of
#: origin (standards.md §4.3: [S42] [S64] [S65]).
def _sd_hints() -> dict[int, str]:
    return {mid: entry["maker"] for mid, entry in sd_makers().items()}


SD_MANUFACTURER_HINTS: dict[int, str] = _sd_hints()


# --- bit access ------------------------------------------------------------------------------


def _parse_hex(text: str, bits: int, what: str) -> int:
    """Parse a sysfs register dump (hex, MSB first) into an int, checking its length."""
    clean = "".join(text.split()).lower().removeprefix("0x")
    if len(clean) != bits // 4:
        raise ValueError(f"{what} must be {bits // 4} hex digits ({bits} bits), got {len(clean)}")
    try:
        return int(clean, 16)
    except ValueError:
        raise ValueError(f"{what} is not hexadecimal: {text.strip()[:40]!r}") from None


def _bits(value: int, hi: int, lo: int) -> int:
    """Bits ``hi..lo`` (inclusive, spec numbering: bit 0 is the least significant) of ``value``."""
    return (value >> lo) & ((1 << (hi - lo + 1)) - 1)


def _ascii(value: int, nbytes: int) -> str:
    """Big-endian bytes of ``value`` as text; non-printable bytes shown as ``\\xNN``."""
    raw = value.to_bytes(nbytes, "big")
    return "".join(chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}" for b in raw).rstrip()


# --- CID ---------------------------------------------------------------------------------------


@dataclass
class Cid:
    """Decoded Card IDentification register (SD layout [S12], or MMC/eMMC layout).

    ``manufactured`` is ``YYYY-MM``. For MMC cards the year is ambiguous without EXT_CSD (1997+n
    or 2013+n); discovery prefers the kernel's own ``date`` attribute, which resolves it.
    """

    card_type: str
    manufacturer_id: int
    manufacturer_hint: str | None
    oem_id: str
    product_name: str
    revision: str
    serial: int
    serial_hex: str
    manufactured: str
    crc7: int


def decode_cid(text: str, card_type: str = "SD") -> Cid:
    """Decode a 32-hex-digit CID as printed by ``/sys/block/mmcblkN/device/cid``.

    SD layout [S12]: MID [127:120], OID [119:104] (2 ASCII), PNM [103:64] (5 ASCII), PRV [63:56]
    (BCD n.m), PSN [55:24], MDT [19:8] (year since 2000 in [19:12], month in [11:8]), CRC7 [7:1].
    MMC layout (JEDEC): MID [127:120], OID [111:104], PNM [103:56] (6 ASCII), PRV [55:48],
    PSN [47:16], MDT [15:8] (month high nibble, year low nibble), CRC7 [7:1].
    """
    v = _parse_hex(text, 128, "CID")
    crc = _bits(v, 7, 1)
    mid = _bits(v, 127, 120)
    if card_type.upper() == "MMC":
        prv = _bits(v, 55, 48)
        psn = _bits(v, 47, 16)
        month, year = _bits(v, 15, 12), 1997 + _bits(v, 11, 8)
        return Cid(
            card_type="MMC", manufacturer_id=mid, manufacturer_hint=None,
            oem_id=f"0x{_bits(v, 111, 104):02x}", product_name=_ascii(_bits(v, 103, 56), 6),
            revision=f"{prv >> 4}.{prv & 0xF}", serial=psn, serial_hex=f"0x{psn:08x}",
            manufactured=f"{year:04d}-{month:02d}", crc7=crc,
        )
    prv = _bits(v, 63, 56)
    psn = _bits(v, 55, 24)
    year, month = 2000 + _bits(v, 19, 12), _bits(v, 11, 8)
    return Cid(
        card_type=card_type.upper(), manufacturer_id=mid, manufacturer_hint=SD_MANUFACTURER_HINTS.get(mid),
        oem_id=_ascii(_bits(v, 119, 104), 2), product_name=_ascii(_bits(v, 103, 64), 5),
        revision=f"{prv >> 4}.{prv & 0xF}", serial=psn, serial_hex=f"0x{psn:08x}",
        manufactured=f"{year:04d}-{month:02d}", crc7=crc,
    )


# --- CSD ---------------------------------------------------------------------------------------


@dataclass
class Csd:
    """Decoded Card Specific Data: the structure version and the *announced* capacity.

    ``version`` is 1 (SDSC, byte-addressed), 2 (SDHC/SDXC) or 3 (SDUC) for SD cards; for MMC cards
    it is the raw CSD_STRUCTURE (0-2 = CSD 1.0-1.2, 3 = given in EXT_CSD).
    ``capacity_bytes`` is what the card claims; a fake card claims a fake size. For MMC cards
    larger than 2 GB the CSD says C_SIZE = 0xFFF and the size lives in EXT_CSD, so it is None.
    """

    card_type: str
    structure: int
    version: int
    read_bl_len: int
    c_size: int
    c_size_mult: int | None
    capacity_bytes: int | None
    capacity_family: str | None


def capacity_family(capacity_bytes: int | None) -> str | None:
    """SDSC / SDHC / SDXC / SDUC by announced capacity [S12 p21, p140]."""
    if capacity_bytes is None:
        return None
    for name, upper in CAPACITY_FAMILIES:
        if capacity_bytes <= upper:
            return name
    return None


def decode_csd(text: str, card_type: str = "SD") -> Csd:
    """Decode a 32-hex-digit CSD as printed by ``/sys/block/mmcblkN/device/csd`` [S35 mmc_decode_csd].

    * CSD v1 (CSD_STRUCTURE 0): capacity = (C_SIZE + 1) x 2^(C_SIZE_MULT + 2) x 2^READ_BL_LEN,
      with READ_BL_LEN [83:80], C_SIZE [73:62], C_SIZE_MULT [49:47].
    * CSD v2 (1): capacity = (C_SIZE + 1) x 512 KiB, C_SIZE [69:48] (22 bits).
    * CSD v3 (2, SDUC): the same formula with a 28-bit C_SIZE [75:48].
    MMC cards use the v1 formula; C_SIZE 0xFFF means "see EXT_CSD" (capacity None).
    """
    v = _parse_hex(text, 128, "CSD")
    structure = _bits(v, 127, 126)
    read_bl_len = _bits(v, 83, 80)
    ctype = card_type.upper()
    if ctype == "MMC" or structure == 0:
        c_size, mult = _bits(v, 73, 62), _bits(v, 49, 47)
        if ctype == "MMC" and c_size == 0xFFF:
            cap = None
        else:
            cap = (c_size + 1) << (mult + 2 + read_bl_len)
        version = structure + 1 if ctype != "MMC" else structure
        return Csd(ctype, structure, version, read_bl_len, c_size, mult, cap,
                   capacity_family(cap) if ctype != "MMC" else None)
    if structure == 1:
        c_size = _bits(v, 69, 48)
    elif structure == 2:
        c_size = _bits(v, 75, 48)
    else:
        raise ValueError(f"CSD_STRUCTURE {structure} is reserved")
    cap = (c_size + 1) * 512 * 1024
    return Csd(ctype, structure, structure + 1, read_bl_len, c_size, None, cap, capacity_family(cap))


# --- SD Status (ssr) -------------------------------------------------------------------------


@dataclass
class SdStatus:
    """The classes a card declares in its 512-bit SD Status register (``ssr``) [S12 p104-105] [S59].

    Field positions (bits, byte offsets in the 64-byte MSB-first dump), from standards.md §2.5:
    SPEED_CLASS 447:440 (byte 8), PERFORMANCE_MOVE 439:432 (byte 9), AU_SIZE 431:428 (byte 10 high
    nibble), UHS_SPEED_GRADE 399:396 (byte 14 high), UHS_AU_SIZE 395:392 (byte 14 low),
    VIDEO_SPEED_CLASS 391:384 (byte 15, 8 bits; one decoder uses 4 bits, we follow the C decoders
    and test vectors), VSC_AU_SIZE 377:368, APP_PERF_CLASS 339:336 (byte 21 low nibble),
    DISCARD 313, FULE 312. Names are None when the card declares nothing there; the raw codes are
    kept so a reserved value is visible rather than hidden.
    """

    bus_width_bits: int | None
    speed_class: str | None
    speed_class_code: int
    performance_move_bytes_per_s: int | None
    performance_move_code: int
    au_size_bytes: int | None
    au_size_code: int
    uhs_speed_grade: str | None
    uhs_speed_grade_code: int
    uhs_au_size_bytes: int | None
    uhs_au_size_code: int
    video_speed_class: str | None
    video_speed_class_code: int
    vsc_au_size_code: int
    app_perf_class: str | None
    app_perf_class_code: int
    discard_support: bool
    fule_support: bool
    declared: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-able form."""
        return asdict(self)


def _named(table: dict[int, str], code: int) -> str | None:
    """A class name for a code: None for 0 (nothing declared), "reserved(N)" when unknown."""
    if code == 0:
        return None
    return table.get(code, f"reserved({code})")


def decode_ssr(text: str) -> SdStatus:
    """Decode the 128-hex-digit SD Status as printed by ``/sys/block/mmcblkN/device/ssr`` [S35]."""
    v = _parse_hex(text, 512, "SD Status (ssr)")
    bus = {0: 1, 2: 4}.get(_bits(v, 511, 510))
    sc = _bits(v, 447, 440)
    pm = _bits(v, 439, 432)
    au = _bits(v, 431, 428)
    uhs = _bits(v, 399, 396)
    uhs_au = _bits(v, 395, 392)
    vsc = _bits(v, 391, 384)
    vsc_au = _bits(v, 377, 368)
    app = _bits(v, 339, 336)
    speed_name = _named(SPEED_CLASS_NAMES, sc)
    uhs_name = _named(UHS_GRADE_NAMES, uhs)
    video_name = None if vsc == 0 else (f"V{vsc}" if vsc in VIDEO_CLASSES else f"reserved({vsc})")
    app_name = _named(APP_CLASS_NAMES, app)
    declared = [n for n in (speed_name, uhs_name, video_name, app_name) if n and not n.startswith("reserved")]
    return SdStatus(
        bus_width_bits=bus,
        speed_class=speed_name, speed_class_code=sc,
        # Pm in 1 MB/s steps; 0 = not defined (Class 10/UHS), FFh = infinity [S12 §4.13].
        performance_move_bytes_per_s=None if pm in (0, 0xFF) else pm * 1_000_000,
        performance_move_code=pm,
        au_size_bytes=AU_SIZE_BYTES.get(au), au_size_code=au,
        uhs_speed_grade=uhs_name, uhs_speed_grade_code=uhs,
        uhs_au_size_bytes=AU_SIZE_BYTES.get(uhs_au), uhs_au_size_code=uhs_au,
        video_speed_class=video_name, video_speed_class_code=vsc,
        vsc_au_size_code=vsc_au,
        app_perf_class=app_name, app_perf_class_code=app,
        discard_support=bool(_bits(v, 313, 313)), fule_support=bool(_bits(v, 312, 312)),
        declared=declared,
    )
