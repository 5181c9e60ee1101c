"""The path sticks read at once share (`readers --probe`): the deepest USB hub above their USB
devices, or the host controller's root hub; none for one device or separate controllers."""

from __future__ import annotations

import os

from cardbench.devices.identity import _hub_reader
from cardbench.devices.usb import shared_hub


def _usb(path, **attrs) -> str:
    os.makedirs(path, exist_ok=True)
    for k, v in {"idVendor": "1d6b", "idProduct": "0002", "speed": "480", **attrs}.items():
        with open(os.path.join(path, k), "w") as f:
            f.write(v + "\n")
    return str(path)


def _controller(path, vendor="0x1b36", device="0x000d"):
    os.makedirs(path)
    for k, v in {"vendor": vendor, "device": device}.items():
        with open(os.path.join(path, k), "w") as f:
            f.write(v + "\n")
    return str(path)


def test_two_sticks_on_one_controller_share_the_controller(tmp_path):
    ctl = _controller(tmp_path / "pci0000:00/0000:00:07.0")
    root = _usb(os.path.join(ctl, "usb2"), serial="0000:00:07.0", product="xHCI Host Controller")
    a = _usb(os.path.join(root, "2-1"), idVendor="46f4", idProduct="0001", serial="Q1")
    b = _usb(os.path.join(root, "2-2"), idVendor="46f4", idProduct="0001", serial="Q2")
    hub = shared_hub([a, b])
    assert hub is not None and hub.root and hub.port_path == "usb2" and hub.serial == "0000:00:07.0"
    reader = _hub_reader(hub, 2, None)
    assert reader.kind == "hub" and reader.identity() == "usb:1b36:000d:0000:00:07.0"
    assert reader.name == "USB host controller 0000:00:07.0 (xHCI Host Controller)"
    assert _hub_reader(hub, 2, "desk hub").name == "desk hub"
    # one on each root hub of the controller (xHCI: one per speed): the same controller, the same identity
    root3 = _usb(os.path.join(ctl, "usb3"), idProduct="0003", speed="5000", serial="0000:00:07.0")
    c = _usb(os.path.join(root3, "3-1"), idVendor="46f4", idProduct="0001", serial="Q3")
    both = shared_hub([a, c])
    assert both is not None and both.port_path == "usb2+usb3" and both.speed == "5000"
    assert _hub_reader(both, 2, None).identity() == reader.identity()


def test_sticks_behind_a_hub_share_that_hub_not_the_controller(tmp_path):
    root = _usb(tmp_path / "usb3", serial="0000:00:06.0")
    hub_dir = _usb(os.path.join(root, "3-1"), idVendor="05e3", idProduct="0610", product="USB2.1 Hub")
    a = _usb(os.path.join(hub_dir, "3-1.1"), idVendor="46f4", idProduct="0001")
    b = _usb(os.path.join(hub_dir, "3-1.4"), idVendor="46f4", idProduct="0001")
    hub = shared_hub([a, b])
    assert hub is not None and not hub.root and hub.port_path == "3-1"
    # a hub without a serial is told apart by its port
    assert _hub_reader(hub, 2, None).identity() == "usb:05e3:0610:port 3-1"


def test_no_hub_for_one_device_or_separate_controllers(tmp_path):
    a = _usb(os.path.join(_usb(tmp_path / "0000:00:04.0/usb2"), "2-1"), idVendor="46f4")
    b = _usb(os.path.join(_usb(tmp_path / "0000:00:05.0/usb3"), "3-1"), idVendor="46f4")
    assert shared_hub([a, a]) is None
    assert shared_hub([a, b]) is None
