"""The VM harness itself, on the host (no QEMU needed): the initramfs archive, module order,
and the skip rule (a reason naming what is missing; with CI=true a failure)."""

from __future__ import annotations

import os
import stat
import time

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


def test_a_late_reply_after_a_timeout_is_not_the_next_commands(tmp_path):
    """The guest agent (guest_agent.serve, run here on a socket pair) answers a command the host
    stopped waiting for after the host's next request went out: that late reply is dropped by
    its id, and the next command gets its own reply; the stream goes on."""
    import socket
    import threading

    import guest_agent

    host, agent = socket.socketpair()
    inp, out = agent.makefile("rb", buffering=0), agent.makefile("wb", buffering=0)
    server = threading.Thread(target=guest_agent.serve, args=(inp, out, True), daemon=True)
    server.start()
    g = vmharness.Guest(agent=host)
    try:
        assert g._recv_line(time.monotonic() + 10) == {"ready": True}
        g.reply_slack = -0.8          # the host gives up 0.8 s before the agent's own timeout
        with pytest.raises(TimeoutError):
            g.run("sleep", "5", timeout=1.0)
        g.reply_slack = 30.0
        r = g.run("echo", "next")
        assert (r.rc, r.stdout) == (0, "next\n")
        assert g.stale_replies == 1                 # the sleep's reply (killed: rc -1009) dropped
        job = g.run("sh", "-c", "echo bg", background=True).stdout
        assert g.wait_job(job, timeout=10).stdout == "bg\n"
    finally:
        host.shutdown(socket.SHUT_WR)
        server.join(10)
        host.close()
        agent.close()


def test_a_long_reply_comes_whole_and_a_garbled_line_is_dropped():
    """A reply longer than one write() takes on the port comes whole (the agent writes until all
    is out); a line that is not JSON (a reply cut short) answers no request and is dropped."""
    import socket
    import threading

    import guest_agent

    host, agent = socket.socketpair()
    host.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    agent.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    agent.setblocking(False)             # a write takes what fits, as the virtio port does
    inp, out = agent.makefile("rb", buffering=0), agent.makefile("wb", buffering=0)
    server = threading.Thread(target=guest_agent.serve, args=(inp, out, True), daemon=True)
    g = vmharness.Guest(agent=host)
    g._buf = b'{"rc": 0, "stdout": "cut sh\n'          # what a reply cut short left
    try:
        server.start()
        r = g.run("python3", "-c", "print('x' * 3_000_000)", timeout=60)
        assert r.rc == 0 and len(r.stdout) == 3_000_001
        assert g.stale_replies == 2                     # the garbled line and the agent's hello
    finally:
        host.shutdown(socket.SHUT_WR)
        server.join(10)
        host.close()
        agent.close()
