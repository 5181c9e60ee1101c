"""The VM harness itself, on the host (no QEMU needed): the initramfs archive, module order,
and the skip rule (a reason naming what is missing; with CI=true a failure)."""

from __future__ import annotations

import os
import stat

import pytest

import vm_helpers
import vmharness


def test_modules_come_after_their_dependencies(tmp_path):
    base = tmp_path / "lib" / "modules" / "9.9"
    base.mkdir(parents=True)
    (base / "modules.dep").write_text("kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/netfs/netfs.ko\n"
                                      "kernel/net/9p/9pnet.ko:\nkernel/fs/netfs/netfs.ko:\n")
    (base / "modules.builtin").write_text("kernel/drivers/virtio/virtio_pci.ko\n")
    order = vmharness._module_order("9.9", ("9p", "virtio_pci"), str(tmp_path / "lib" / "modules"))
    assert order == ["kernel/fs/netfs/netfs.ko", "kernel/net/9p/9pnet.ko", "kernel/fs/9p/9p.ko"]


def test_the_archive_is_newc(tmp_path):
    data = vmharness._cpio_newc([("init", stat.S_IFREG | 0o755, b"#!/bin/sh\n"), ("bin", stat.S_IFDIR | 0o755, b"")])
    assert data.startswith(b"070701") and b"init\0#!/bin/sh\n" in data.replace(b"\0\0", b"\0")
    assert b"TRAILER!!!\0" in data and len(data) % 4 == 0
    # the mode of the first entry is in its header (8 hex digits after magic and inode)
    assert int(data[14:22], 16) == stat.S_IFREG | 0o755


def test_what_is_missing_is_named_and_ci_fails(monkeypatch):
    monkeypatch.setattr(vm_helpers, "missing", lambda: ["qemu-system-x86_64 (apt-get install qemu-system-x86)"])
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="missing: qemu-system-x86_64"):
        vm_helpers.require_vm()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true: a skipped VM tier is a failure"):
        vm_helpers.require_vm()


def test_this_host_reports_what_it_lacks_in_words():
    for reason in vmharness.missing():
        assert "(" in reason        # each names the package or why
    kernel, release = vmharness.find_kernel()
    assert (kernel is None) == (release is None)
    if kernel:
        assert os.path.basename(kernel) == f"vmlinuz-{release}"
