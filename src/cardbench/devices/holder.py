"""Whether a USB block device is a card reader or a stick: :func:`classify_holder`, the evidence in
words (the identity rule of :mod:`cardbench.devices.identity` rests on it, and
:class:`cardbench.devices.discovery.BlockDevice` shows it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cardbench.devices.discovery import BlockDevice


#: words in a USB product or SCSI INQUIRY name that a card reader uses for itself
READER_WORDS = ("card reader", "cardreader", "reader", "sd/mmc", "sd/ms", "ms/ms", "multi-card", "multicard",
                "multi card", "compactflash", "cf card", "xd-picture", "microsd", "micro sd", "sdxc", "sdhc",
                "card slot")


@dataclass
class SessionHint:
    """What a drawer session saw of a device (:class:`cardbench.devices.watch.Watcher`):
    ``arrived_with_medium``: the block device appeared holding its medium (a stick, or an adapter
    plugged in with its card); ``medium_changed``: its medium went or came while the USB device
    stayed (a reader)."""

    arrived_with_medium: bool = False
    medium_changed: bool = False


def classify_holder(dev: BlockDevice, hint: SessionHint | None = None) -> tuple[str, list[str]]:
    """What holds the medium of a USB block device: ("reader" | "stick" | "unsure", evidence in
    words). Reader evidence wins (a USB device that outlived a medium cannot be one card)."""
    usb = dev.usb
    reader: list[str] = []
    stick: list[str] = []
    if not dev.medium_present:
        reader.append("an empty slot (size 0)")
    luns = 1 + len(usb.same_reader) if usb is not None else 1
    if luns > 1:
        reader.append(f"{luns} LUNs on one USB device")
    if hint is not None and hint.medium_changed:
        reader.append("its medium changed while the USB device stayed")
    names = " ".join(x for x in (usb.product if usb else None, dev.vendor, dev.model) if x).lower()
    word = next((w for w in READER_WORDS if w in names), None)
    if word is not None:
        reader.append(f"its name says so ({word!r})")
    if reader:
        return "reader", reader
    if not dev.removable:
        stick.append("the medium is not removable (SCSI RMB bit clear): it comes and goes with the USB device")
    if hint is not None and hint.arrived_with_medium:
        stick.append("it arrived with its medium and one LUN")
    if stick:
        return "stick", stick
    return "unsure", ["removable medium on one LUN and nothing else seen: a stick or a single-slot reader "
                      "(swap a card in it during a drawer session to tell)"]
