"""A card's ATA IDENTIFY answer for a person: answer first, in words, within 80 columns."""

from __future__ import annotations

import textwrap

from cardbench.devices.ata import Identify
from cardbench.units import fmt_rate, fmt_size
from cardbench.verdicts.ceiling import interface_mode_ceiling


def render_identify(ident: Identify) -> str:
    """"CompactFlash card SanDisk SDCFB-256, serial 1234567890", then capacity, modes and what
    the mode in use caps."""
    kind = "CompactFlash card" if ident.is_cf else "ATA device (not CompactFlash)"
    serial = f"serial {ident.serial}" if ident.serial else "no serial number"
    lines = [f"{kind} {ident.model or '(no model string)'}, {serial}",
             f"  firmware   {ident.firmware or '-'}",
             f"  capacity   {fmt_size(ident.capacity_bytes)} ({ident.sectors:,} sectors of "
             f"{ident.logical_sector_bytes} bytes{', 48-bit' if ident.sectors_48 else ''})",
             f"  modes      {ident.modes_text()}"]
    summary = ident.summary()
    ceiling = interface_mode_ceiling(summary)
    name = summary["mode"]["name"]
    if ceiling is not None:
        how = "in use" if summary["mode"]["selected"] else "its fastest PIO mode (no DMA mode selected)"
        lines.append(f"  caps       {fmt_rate(ceiling.typical_bytes_per_s, 'MB/s', 1)}: {name}, {how}")
    else:
        lines.append(f"  caps       unknown: {name} has no verified rate")
    if ident.features:
        lines.append(textwrap.fill(", ".join(ident.features), 79, initial_indent="  features   ",
                                   subsequent_indent=" " * 13))
    lines.append(f"  checksum   {ident.checksum}")
    lines.extend(textwrap.fill(p, 79, initial_indent="  warning    ", subsequent_indent=" " * 13)
                 for p in ident.problems)
    return "\n".join(lines)
