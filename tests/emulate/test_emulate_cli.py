"""`cardbench emulate ...`: start, set, status, yank, stop (detached servers)."""

from __future__ import annotations

import errno
import json
import os

import pytest
from click.testing import CliRunner

from cardbench.cli.emulate_cmd import emulate
from cardbench.errors import UsageError
from emulate_helpers import assert_gone, dio_read, dio_write, needs_emulator

pytestmark = needs_emulator


@pytest.fixture
def cli(tmp_path, monkeypatch, emu_tmp):
    root = emu_tmp / f"cli-{tmp_path.name}"
    monkeypatch.setenv("CARDBENCH_EMULATE_ROOT", str(root))
    monkeypatch.delenv("CARDBENCH_EMULATE_DATA", raising=False)
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(emulate, list(args), catch_exceptions=True)

    yield invoke
    invoke("stop", "--all")


def test_cli_start_set_status_yank_stop(cli):
    r = cli("start", "--name", "demo1", "--size", "32MiB", "--write-rate", "4.9MB/s", "--read-rate", "20MB/s",
            "--real-size", "16MiB", "--fake-mode", "drop", "--cache-size", "1MB", "--cache-rate", "40MB/s",
            "--ceiling", "30MB/s", "--latency", "1ms")
    assert r.exit_code == 0, (r.output, r.exception)
    device = r.output.strip()
    assert device.startswith("/dev/loop")
    st = json.loads(cli("status", "demo1", "--json").output)
    assert st["running"] and st["device"] == device
    workdir, pid = st["workdir"], st["pid"]
    assert st["write_rate"] == 4.9e6 and st["read_rate"] == 20e6 and st["latency"] == 0.001
    assert st["real_size"] == 16 * 2**20 and st["fake_mode"] == "drop" and st["ceiling"] == 30e6
    assert dio_read(device, 0, 4096) == bytes(4096)

    r = cli("set", "demo1", "--write-rate", "2MB/s", "--ceiling", "none", "--error", "0:4096:read", "--json")
    assert r.exit_code == 0, (r.output, r.exception)
    st = json.loads(r.output)
    assert st["write_rate"] == 2e6 and st["ceiling"] is None and st["errors"] == [[0, 4096, "read"]]
    with pytest.raises(OSError) as e:
        dio_read(device, 0, 4096)
    assert e.value.errno == errno.EIO

    assert "demo1" in cli("status").output
    r = cli("yank", "demo1")
    assert r.exit_code == 0 and "yanked" in r.output
    with pytest.raises(OSError):
        dio_read(device, 8192, 4096)

    r = cli("stop", "demo1")
    assert r.exit_code == 0, (r.output, r.exception)
    assert_gone(workdir, device, pid)
    assert "no emulated cards" in cli("status").output


def test_cli_errors_are_cardbench_errors(cli):
    r = cli("set", "nope", "--write-rate", "1MB/s")
    assert isinstance(r.exception, UsageError)
    r = cli("start", "--size", "3")
    assert isinstance(r.exception, UsageError)
    r = cli("start", "--write-rate", "fast")     # read by cardbench.units: click's bad parameter, exit 2
    assert r.exit_code == 2 and "not a rate: 'fast'" in r.output
    r = cli("set", "nope", "--error", "0:4k:sideways")
    assert r.exit_code == 2 and "START:END[:read|write|both]" in r.output
    r = cli("stop")
    assert isinstance(r.exception, UsageError)
    r = cli("start", "--name", "twice", "--size", "1MiB")
    assert r.exit_code == 0, (r.output, r.exception)
    r = cli("start", "--name", "twice", "--size", "1MiB")
    assert isinstance(r.exception, UsageError) and "already running" in str(r.exception)
    assert os.path.isdir(os.environ["CARDBENCH_EMULATE_ROOT"])


def test_cli_wear_fields_start_set_and_show(cli):
    r = cli("start", "--name", "worn", "--size", "4MiB", "--write-rate", "1000MB/s", "--read-rate", "1000MB/s",
            "--wear-cycles", "1", "--wear-spread", "0", "--wear-block", "128KiB", "--wear-mode", "ff",
            "--wear-readonly-at", "0.5")
    assert r.exit_code == 0, (r.output, r.exception)
    device = r.output.strip()
    w = json.loads(cli("wear", "worn", "--json").output)
    assert (w["blocks"], w["block"], w["limits"], w["mode"], w["readonly_after"]) == (32, 128 * 1024, [[1, 32]], "ff", 16)
    block = b"\x5a" * (128 * 1024)
    dio_write(device, 0, block)
    dio_write(device, 0, block)                # the second write wears block 0: it reads as all FF
    assert dio_read(device, 0, 4096) == b"\xff" * 4096
    out = cli("wear", "worn").output
    assert "32 wear blocks of 128.0 KiB, 1 write each" in out and "1 blocks worn" in out
    assert "first worn: block 0 in pass 2; worn blocks: 32 by pass 2" in out
    assert "1 of 32 blocks worn" in cli("status", "worn").output
    r = cli("set", "worn", "--wear-cycles", "none", "--json")
    assert r.exit_code == 0, (r.output, r.exception)
    assert json.loads(r.output)["wear"] is None
    assert dio_read(device, 0, 4096) == block[:4096]      # the write before it wore landed
    r = cli("set", "worn", "--wear-mode", "melt")
    assert r.exit_code == 2 and "melt" in r.output
    r = cli("set", "worn", "--wear-cycles", "0")
    assert isinstance(r.exception, UsageError) and "wear_cycles must be" in str(r.exception)
