"""Block devices: what is attached, what it is (card, reader, link), and what may be done to it.

* ``list_devices()`` / ``get_device()`` (discovery.py): a sysfs walk completed by lsblk and the
  kernel's mount tables; USB reader, link speed and driver; SD/MMC CID, CSD and SD Status decoded;
  with ``probe_ata=True`` each disk's ATA IDENTIFY data (a CF card behind a SAT reader).
* ``ata``: ``decode_identify()`` and ``read_identify()`` (ATA PASS-THROUGH over SG_IO).
* ``safety``: the rules before any raw write (not mounted, not the system, not in use, writable,
  confirmed by the user) and ``open_exclusive()``.
* ``preserve``: ``--preserve``: a crash-safe journal of the bytes a test overwrites, restored after
  the test or by ``recover_pending()`` on the next run.
* ``lock``: one cardbench per target at a time.

Submodules ``safety``, ``preserve`` and ``lock`` are imported explicitly by their users.
"""

from cardbench.devices.ata import (
    AtaProbe,
    Identify,
    IdentifyError,
    decode_identify,
    read_identify,
)
from cardbench.devices.discovery import (
    BlockDevice,
    CardInfo,
    Partition,
    get_device,
    list_devices,
    resolve_device,
    run_lsblk,
)
from cardbench.devices.registers import (
    Cid,
    Csd,
    SdStatus,
    decode_cid,
    decode_csd,
    decode_ssr,
)
from cardbench.devices.usb import USB_SPEEDS, UsbInfo, UsbSpeed

#: Schema name of the JSON document ``cardbench list --json`` prints.
SCHEMA = "cardbench.devices/1"

__all__ = [
    "SCHEMA", "BlockDevice", "CardInfo", "Partition", "UsbInfo", "UsbSpeed", "USB_SPEEDS",
    "Cid", "Csd", "SdStatus", "decode_cid", "decode_csd", "decode_ssr",
    "get_device", "list_devices", "resolve_device", "run_lsblk",
    "AtaProbe", "Identify", "IdentifyError", "decode_identify", "read_identify",
]
