"""IDENTIFY DEVICE blocks built from the specification, for the ATA tests.

The word layout is the one SanDisk's CompactFlash OEM Product Manual (Table 5-8) and the CF+ & CF
Specification 4.1 give, with the ATA-7 words for modes (49, 53, 63, 64, 88) and the integrity word
255 (see cardbench.devices.ata). Each card here is what such a card would answer; the values are
chosen by us, not copied from a device.
"""

from __future__ import annotations


def ata_string(text: str, nwords: int) -> list[int]:
    """An ATA string: two characters per word, the first in the high byte, padded with spaces."""
    raw = text.encode("latin-1").ljust(2 * nwords, b" ")[:2 * nwords]
    return [(raw[2 * i] << 8) | raw[2 * i + 1] for i in range(nwords)]


def build_identify(*, model: str = "SanDisk SDCFB-256", serial: str = "", firmware: str = "Rev 0.00",
                   sectors: int = 500_736, general_config: int = 0x848A, pio34: int = 0b11,
                   mdma: int = -1, mdma_sel: int | None = None, udma: int = -1, udma_sel: int | None = None,
                   adv_pio: int = 0, adv_pio_sel: int = 0, adv_mdma: int = 0, adv_mdma_sel: int = 0,
                   dma: bool | None = None, lba48: bool = False, power_ma: int | None = None,
                   checksum: bool | None = True, raw_strings: dict[int, list[int]] | None = None,
                   extra: dict[int, int] | None = None) -> bytes:
    """A 512-byte little-endian IDENTIFY block.

    ``mdma``/``udma``: the highest mode supported (-1: none); ``*_sel``: the selected mode. ``adv_pio`` 1 = PIO 5, 2 = PIO 6; ``adv_mdma`` 1 = MDMA 3, 2 = MDMA 4 (word 163).
    ``checksum``: True writes a valid word 255, False a wrong one, None leaves word 255 zero.
    """
    w = [0] * 256
    w[0] = general_config
    w[1], w[3], w[6] = 980, 16, 32                 # default cylinders, heads, sectors/track
    w[7], w[8] = (sectors >> 16) & 0xFFFF, sectors & 0xFFFF     # sectors per card, MSW first [CF]
    w[10:20] = ata_string(serial.rjust(20), 10)    # serial: right justified [CF]
    w[22] = 4                                      # ECC bytes on READ/WRITE LONG
    w[23:27] = ata_string(firmware, 4)
    w[27:47] = ata_string(model, 20)               # model: left justified [CF]
    w[47] = 0x8001
    has_dma = (mdma >= 0 or udma >= 0) if dma is None else dma
    w[49] = 0x0200 | (0x0100 if has_dma else 0)    # LBA; DMA when any DMA mode
    w[51] = 0x0200                                 # PIO mode 2 in bits 15-8
    w[53] = 0x0003 | (0x0004 if udma >= 0 else 0)  # words 54-58, 64-70 valid; 88 valid with UDMA
    w[60], w[61] = min(sectors, 0x0FFFFFFF) & 0xFFFF, (min(sectors, 0x0FFFFFFF) >> 16) & 0xFFFF
    if mdma >= 0:
        w[63] = (1 << (mdma + 1)) - 1
        if mdma_sel is not None:
            w[63] |= 1 << (8 + mdma_sel)
    w[64] = pio34
    w[65] = w[66] = w[67] = w[68] = 120
    w[82], w[83], w[84] = 0x500C, 0x5004 | (0x0400 if lba48 else 0), 0x4000
    w[85], w[86], w[87] = 0x100C, 0x1004 | (0x0400 if lba48 else 0), 0x4000
    if udma >= 0:
        w[88] = (1 << (udma + 1)) - 1
        if udma_sel is not None:
            w[88] |= 1 << (8 + udma_sel)
    if lba48:
        for i in range(4):
            w[100 + i] = (sectors >> (16 * i)) & 0xFFFF
    if power_ma is not None:
        w[160] = 0x8000 | power_ma                 # valid, power level 1 supported, max current
    w[163] = adv_pio | (adv_mdma << 3) | (adv_pio_sel << 6) | (adv_mdma_sel << 9)
    for index, words in (raw_strings or {}).items():
        w[index:index + len(words)] = words
    for index, value in (extra or {}).items():
        w[index] = value
    if checksum is not None:
        w[255] = 0x00A5
        total = sum(b for x in w for b in x.to_bytes(2, "little"))
        good = (-total) & 0xFF
        w[255] |= (good if checksum else (good + 1) & 0xFF) << 8
    return b"".join(x.to_bytes(2, "little") for x in w)


#: cards of three eras, built from the specification
OLD_PIO_CARD = dict(model="SanDisk SDCFB-256", serial="1234567890", firmware="Rev 0.00", sectors=500_736,
                    mdma=-1, udma=-1, checksum=None)
UDMA_CARD = dict(model="LEXAR ATA FLASH CARD", serial="L07A3K21C9", firmware="V1.00", sectors=7_831_152,
                 mdma=2, udma=4, udma_sel=4, adv_pio=2, adv_mdma=2, power_ma=500)
BIG_CARD = dict(model="SanDisk SDCFXPS-256G", serial="AJG012345678", firmware="HDX 7.08", sectors=500_118_192,
                mdma=2, udma=7, udma_sel=6, adv_pio=2, adv_pio_sel=0, adv_mdma=2, lba48=True, power_ma=500)
