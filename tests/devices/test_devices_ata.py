"""ATA IDENTIFY: the decoder on blocks built from the specification and on recorded dumps, checked
against hdparm's own decoding; SG_IO on what this machine has (loop devices, a stalled FUSE file);
``cardbench list`` against ``hdparm -I`` where a SAT device is attached."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from ata_blocks import BIG_CARD, OLD_PIO_CARD, UDMA_CARD, ata_string, build_identify
from cardbench.devices import list_devices
from cardbench.devices.ata import (
    IdentifyError,
    decode_identify,
    hdparm_text,
    identify_cdb,
    read_identify,
)
from cardbench.errors import CardbenchError
from devices_helpers import HERE, needs_loop
from realparts import call_cli, can_emulate, emulators_under, stop_process

DUMPS = os.path.join(HERE, "fixtures", "identify")
HDPARM = shutil.which("hdparm")


# --- the decoder on cards built from the specification ---------------------------------------------


def test_old_pio_only_card():
    ident = decode_identify(build_identify(**OLD_PIO_CARD))
    assert ident.is_cf and ident.general_config == 0x848A
    assert (ident.model, ident.serial, ident.firmware) == ("SanDisk SDCFB-256", "1234567890", "Rev 0.00")
    assert ident.sectors == ident.sectors_28 == ident.sectors_cf == 500_736 and ident.sectors_48 is None
    assert ident.capacity_bytes == 500_736 * 512
    assert ident.pio_modes == [0, 1, 2, 3, 4] and ident.mdma_modes == [] and ident.udma_modes == []
    assert not ident.dma and ident.lba
    assert ident.mode_in_use() == ("PIO", 4, False)      # nothing selected: the fastest PIO, an upper bound
    assert ident.checksum == "absent"
    assert ident.modes_text() == "PIO 0-4"


def test_udma_card_with_cf_advanced_modes_and_power_level():
    ident = decode_identify(build_identify(**UDMA_CARD))
    assert ident.model == "LEXAR ATA FLASH CARD" and ident.serial == "L07A3K21C9" and ident.firmware == "V1.00"
    assert ident.udma_modes == [0, 1, 2, 3, 4] and ident.udma_selected == 4
    assert ident.mdma_modes == [0, 1, 2, 3, 4] and ident.mdma_selected is None      # MDMA 3-4: word 163
    assert ident.pio_modes == [0, 1, 2, 3, 4, 5, 6] and ident.pio_selected is None  # PIO 5-6: word 163
    assert ident.mode_in_use() == ("UDMA", 4, True)
    assert ident.cfa_power_mode1 == {"supported": True, "commands_disabled": False, "max_current_ma": 500}
    assert "CFA feature set" in ident.features and "CFA power mode 1" in ident.features
    assert ident.checksum == "valid" and ident.problems == []
    assert ident.modes_text() == "UDMA 0-4 (4 in use), MDMA 0-4, PIO 0-6"


def test_48_bit_card_and_selected_modes():
    ident = decode_identify(build_identify(**BIG_CARD))
    assert ident.sectors_48 == ident.sectors == 500_118_192 and ident.sectors_28 == 0x0FFFFFFF
    assert "48-bit LBA" in ident.features
    assert ident.udma_modes == list(range(8)) and ident.udma_selected == 6
    assert ident.summary()["mode"] == {"kind": "UDMA", "number": 6, "selected": True, "name": "UDMA 6"}
    assert ident.identity() == "ata:SanDisk SDCFXPS-256G|AJG012345678|500118192"


def test_selected_advanced_pio_and_mdma_modes():
    pio6 = decode_identify(build_identify(adv_pio=2, adv_pio_sel=2))
    assert pio6.pio_selected == 6 and pio6.mode_in_use() == ("PIO", 6, True)
    mdma4 = decode_identify(build_identify(mdma=2, adv_mdma=2, adv_mdma_sel=2))
    assert mdma4.mdma_selected == 4 and mdma4.mode_in_use() == ("MDMA", 4, True)
    mdma1 = decode_identify(build_identify(mdma=2, mdma_sel=1))
    assert mdma1.mdma_modes == [0, 1, 2] and mdma1.mode_in_use() == ("MDMA", 1, True)


def test_odd_strings_are_byte_swapped_trimmed_and_shown():
    nul_serial = [0x0000] * 5 + ata_string("AB12", 2) + [0x0000] * 3    # NUL padding, as some cards do
    control = ata_string("CF\x07card", 4)                                # a control byte in the model
    ident = decode_identify(build_identify(model="x", raw_strings={10: nul_serial, 27: control + [0x2020] * 16}))
    assert ident.serial == "AB12"
    assert ident.model == "CF\\x07card"
    blank = decode_identify(build_identify(model="", serial=""))
    assert blank.model == "" and blank.serial == ""
    assert "the model string (words 27-46) is empty" in blank.problems
    odd = decode_identify(build_identify(model="  SanDisk  SDCFH-004G ", serial="  7"))
    assert odd.model == "SanDisk  SDCFH-004G" and odd.serial == "7"      # inner spaces kept, ends trimmed


def test_bad_checksum_is_reported_not_fatal():
    ident = decode_identify(build_identify(**dict(UDMA_CARD, checksum=False)))
    assert ident.checksum == "bad"
    assert any("word 255 checksum is wrong" in p for p in ident.problems)
    assert ident.model == "LEXAR ATA FLASH CARD"      # the rest still read


def test_hdparm_text_and_raw_bytes_decode_the_same():
    block = build_identify(**BIG_CARD)
    text = hdparm_text(block)
    assert text.count("\n") == 32 and all(len(line.split()) == 8 for line in text.splitlines())
    assert decode_identify(text) == decode_identify(block)
    assert decode_identify(text.encode()) == decode_identify(block)       # text given as bytes
    assert decode_identify("/dev/sdc:\n" + text.upper()) == decode_identify(block)


@pytest.mark.parametrize("data,words", [
    (build_identify()[:511], "truncated: 511 bytes, an IDENTIFY block is 512 bytes"),
    (build_identify() + b"\0\0", "too long: 514 bytes"),
    (b"", "truncated: 0 bytes"),
    ("\n".join(hdparm_text(build_identify()).splitlines()[:31]), "truncated: 248 words, an IDENTIFY block is 256"),
    (hdparm_text(build_identify()).replace("848a", "84za", 1), "line 1 is not hex words ('84za"),
    (hdparm_text(build_identify()) + "0000\n", "too long: 257 words"),
    (build_identify(general_config=0x85C0, extra={83: 0}), "word 0 is 85C0h, an ATAPI device"),
    (build_identify(general_config=0xC000, extra={83: 0}), "no CF or ATA signature: word 0 is C000h"),
    (bytes(512), "all zeros in its signature words: no device answered"),
    (b"\xff" * 512, "word 0 is FFFFh: no device answered"),
    (build_identify(general_config=0x8A84, extra={83: 0}), "848Ah with its bytes swapped"),
], ids=["short-block", "long-block", "empty", "short-text", "non-hex", "long-text", "atapi", "not-ata",
        "zeros", "ones", "swapped"])
def test_bad_input_is_one_line_saying_what_is_wrong(data, words):
    with pytest.raises(IdentifyError) as info:
        decode_identify(data)
    message = info.value.message
    assert words in message
    assert "\n" not in message and len(message) < 200
    assert isinstance(info.value, CardbenchError) and info.value.exit_code == 2


def test_ata_disk_without_cf_signature_is_ata_not_cf():
    ident = decode_identify(build_identify(general_config=0x0040, extra={83: 0x4000}))
    assert not ident.is_cf and ident.cf_advanced == 0


# --- recorded dumps of real devices ----------------------------------------------------------------

RECORDED = {
    # hdparm --Istdout of two Maxtor 6B200M0 disks, posted to linux-kernel on 2006-02-28 (README.md here);
    # the kernel log in the same post says "390721968 sectors: LBA48 ... configured for UDMA/100" (sda)
    # and "max UDMA/133, 398297088 sectors" (sdb): an independent account of the same devices
    "maxtor-6b200m0-sda.hdparm": ("Maxtor 6B200M0", "B4038RRH", "BANC1980", 390_721_968, list(range(6)), 5),
    "maxtor-6b200m0-sdb.hdparm": ("Maxtor 6B200M0", "B41RVA1H", "BANC1BY0", 398_297_088, list(range(7)), 5),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_dumps(name):
    model, serial, firmware, sectors, udma, selected = RECORDED[name]
    with open(os.path.join(DUMPS, name), encoding="ascii") as f:
        ident = decode_identify(f.read())
    assert (ident.model, ident.serial, ident.firmware, ident.sectors) == (model, serial, firmware, sectors)
    assert ident.udma_modes == udma and ident.udma_selected == selected
    assert ident.mdma_modes == [0, 1, 2] and ident.pio_modes == [0, 1, 2, 3, 4]
    assert not ident.is_cf and ident.checksum == "valid"


def _hdparm_view(text: str) -> dict:
    """What ``hdparm --Istdin`` prints, reduced to the fields both tools decode."""
    def field(label: str) -> str:
        m = re.search(rf"^[ \t]*{label}:[ \t]*(.*)$", text, re.M)
        return m.group(1).strip() if m else ""
    dma = re.search(r"^\s*DMA:\s*(.*)$", text, re.M)
    pio = re.search(r"^\s*PIO:\s*(.*)$", text, re.M)
    lba = re.findall(r"LBA(?:48)?\s+user addressable sectors:\s*(\d+)", text)
    adv = re.search(r"CFA advanced modes:\s*(.*)$", text, re.M)
    modes = (dma.group(1).split() if dma else []) + (pio.group(1).split() if pio else []) + \
        (adv.group(1).split() if adv else [])
    return {"model": field("Model Number"), "serial": field("Serial Number"), "firmware": field("Firmware Revision"),
            "sectors": int(lba[-1]) if lba else None, "cf": "CompactFlash ATA device" in text,
            "udma": sorted(int(m.lstrip("*")[4:]) for m in modes if m.lstrip("*").startswith("udma")),
            "udma_selected": next((int(m[5:]) for m in modes if m.startswith("*udma")), None),
            "mdma": sorted({int(m.lstrip("*")[4:]) for m in modes if m.lstrip("*").startswith("mdma")}),
            "pio": sorted({int(m.lstrip("*")[3:]) for m in modes if m.lstrip("*").startswith("pio")}),
            "checksum": "valid" if "Checksum: correct" in text else "bad" if "Checksum: incorrect" in text
            else "absent"}


BUILT = {"old": OLD_PIO_CARD, "udma": UDMA_CARD, "big": BIG_CARD,
         "bad-checksum": dict(UDMA_CARD, checksum=False), "mdma1": dict(mdma=2, mdma_sel=1, udma=-1)}


@pytest.mark.skipif(HDPARM is None, reason="hdparm is not installed")
@pytest.mark.parametrize("name", sorted(BUILT) + sorted(RECORDED))
def test_decoder_agrees_with_hdparm(name):
    """hdparm --Istdin decodes the same text: model, serial, firmware, sectors, every mode, checksum."""
    if name in BUILT:
        text = hdparm_text(build_identify(**BUILT[name]))
    else:
        with open(os.path.join(DUMPS, name), encoding="ascii") as f:
            text = f.read()
    proc = subprocess.run([HDPARM, "--Istdin"], input=text, capture_output=True, text=True, timeout=30)
    theirs = _hdparm_view(proc.stdout)
    ours = decode_identify(text)
    assert theirs == {"model": ours.model, "serial": ours.serial, "firmware": ours.firmware,
                      "sectors": ours.sectors, "cf": ours.is_cf, "udma": ours.udma_modes,
                      "udma_selected": ours.udma_selected, "mdma": ours.mdma_modes, "pio": ours.pio_modes,
                      "checksum": ours.checksum}


# --- SG_IO ---------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("sg_sat_identify") is None, reason="sg3-utils is not installed")
@needs_loop
@pytest.mark.parametrize("length", [16, 12])
def test_cdbs_are_the_ones_sg_sat_identify_sends(loop, length):
    """sg_sat_identify -vvv prints the CDB it sends (and fails on a loop device, which is fine)."""
    dev, _ = loop
    proc = subprocess.run(["sg_sat_identify", "-l", str(length), "-vvv", dev], capture_output=True, text=True,
                          timeout=30)
    m = re.search(r"ATA pass-through\(\d+\) cdb: \[([0-9a-f ]+)\]", proc.stdout + proc.stderr)
    assert m, proc.stderr
    assert identify_cdb(length).hex(" ") == m.group(1)


@needs_loop
def test_a_loop_device_is_not_ata_quickly_and_quietly(loop):
    dev, _ = loop
    start = time.monotonic()
    probe = read_identify(dev)
    elapsed = time.monotonic() - start
    assert probe.status == "not available" and probe.identify is None
    assert probe.reason.startswith("not ATA: ") and "SCSI pass-through" in probe.reason
    assert elapsed < 1.0


def test_a_missing_path_and_a_regular_file_are_not_ata(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (as non-root the probe says so before looking)")
    assert read_identify(str(tmp_path / "none")).status == "not available"
    f = tmp_path / "file"
    f.write_bytes(b"x")
    probe = read_identify(str(f))
    assert probe.status == "not available" and "is not a device" in probe.reason


@needs_loop
def test_an_unprivileged_user_is_told_root_is_needed(loop):
    dev, _ = loop
    code = ("import json,os; from cardbench.devices.ata import read_identify; "
            f"p=read_identify({dev!r}); print(json.dumps(p.to_dict()))")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(HERE)), "src"))
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "python3", "-c", code],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "needs root" and "needs root" in doc["reason"]


@pytest.mark.needs_root
@pytest.mark.skipif(not can_emulate(), reason="needs root, FUSE and loop devices (emulated cards)")
def test_a_stalled_device_is_abandoned_after_the_timeout_and_the_rest_goes_on(tmp_path):
    """The emulated card's FUSE server is stopped (SIGSTOP), so opening its backing file blocks in
    the kernel: the probe gives up after its timeout, and the next probe answers at once."""
    from cardbench.emulate import EmulatedCard
    from cardbench.emulate.spec import CardSpec
    with emulators_under(tmp_path), EmulatedCard(CardSpec(size=16 << 20, write_rate=50e6, read_rate=50e6)) as card:
        stalled = os.path.join(card.reader.mountpoint, card.name)
        stop_process(card.reader.pid)
        try:
            start = time.monotonic()
            probe = read_identify(stalled, timeout=0.5)
            elapsed = time.monotonic() - start
            quick = read_identify(card.device, timeout=0.5)      # the loop device over the stalled card
        finally:
            os.kill(card.reader.pid, signal.SIGCONT)
        assert probe.status == "timed out" and "abandoned" in probe.reason
        assert 0.5 <= elapsed < 2.0
        assert quick.status == "not available" and quick.seconds < 0.5


# --- cardbench list against hdparm -I on a SAT device ----------------------------------------------


@pytest.mark.needs_root
def test_list_agrees_with_hdparm_on_a_sat_device():
    if HDPARM is None or os.geteuid() != 0:
        pytest.skip("needs root and hdparm")
    answered = [d for d in list_devices(probe_ata=True) if d.ata is not None and d.ata.identify is not None]
    if not answered:
        pytest.skip("no SAT device here (a CF card in a USB reader that passes ATA commands): "
                    "nothing to compare cardbench list with hdparm -I on")
    proc = call_cli("list", "--json")
    assert proc.returncode == 0, proc.stderr
    listed = {d["path"]: d for d in json.loads(proc.stdout)["devices"]}
    for dev in answered:
        theirs = _hdparm_view(subprocess.run([HDPARM, "-I", dev.path], capture_output=True, text=True,
                                             timeout=60).stdout)
        ours = listed[dev.path]["ata"]["identify"]
        assert (ours["model"], ours["serial"], ours["firmware"], ours["sectors"]) == \
            (theirs["model"], theirs["serial"], theirs["firmware"], theirs["sectors"])
        assert ours["udma_modes"] == theirs["udma"] and ours["pio_modes"] == theirs["pio"]


def test_recorded_dumps_have_their_origin_noted():
    assert os.path.exists(os.path.join(DUMPS, "README.md"))
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(DUMPS, "*.hdparm"))) == sorted(RECORDED)


# --- cardbench identify -------------------------------------------------------------------------


def test_identify_command_reads_a_dump_file_and_stdin(tmp_path):
    dump = tmp_path / "card.bin"
    dump.write_bytes(build_identify(**UDMA_CARD))
    proc = call_cli("identify", str(dump))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "CompactFlash card LEXAR ATA FLASH CARD, serial L07A3K21C9"
    assert "  modes      UDMA 0-4 (4 in use), MDMA 0-4, PIO 0-6" in lines
    assert "  caps       66.7 MB/s: UDMA 4, in use" in lines
    assert max(len(line) for line in lines) <= 80
    with open(os.path.join(DUMPS, "maxtor-6b200m0-sda.hdparm"), encoding="ascii") as f:
        proc = call_cli("identify", "-", "--json", input=f.read())
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["identity"] == "ata:Maxtor 6B200M0|B4038RRH|390721968" and doc["mode"]["name"] == "UDMA 5"


@pytest.mark.parametrize("content,code,words", [
    (hdparm_text(build_identify())[:100], 2, "IDENTIFY dump truncated: 20 words"),
    ("hello world\n", 2, "IDENTIFY dump line 1 is not hex words ('hello world')"),
    (hdparm_text(build_identify(general_config=0x85C0, extra={83: 0})), 2, "an ATAPI device"),
])
def test_identify_command_bad_dumps_get_one_line(tmp_path, content, code, words):
    dump = tmp_path / "dump.txt"
    dump.write_text(content)
    proc = call_cli("identify", str(dump))
    assert proc.returncode == code
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1 and words in proc.stderr


@needs_loop
def test_identify_command_on_a_device_that_is_not_ata(loop, tmp_path):
    dev, _ = loop
    proc = call_cli("identify", dev)
    assert proc.returncode == 3 and len(proc.stderr.splitlines()) == 1
    assert f"cardbench: {dev}: not ATA: " in proc.stderr
    proc = call_cli("identify", str(tmp_path / "missing"))
    assert proc.returncode == 3 and "no such file or directory" in proc.stderr
