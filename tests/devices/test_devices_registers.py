"""SD/MMC register decoding against hand-computed values (and round trips with hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cardbench.devices.registers import (
    AU_SIZE_BYTES,
    decode_cid,
    decode_csd,
    decode_ssr,
)

# SanDisk Extreme 64GB, real dump (ironsheep/P2-uSD-FS DOCs/cards/sandisk-sn64g-64gb.md).
SN64G_CID = "035344534e363447867e650771016b8d"
SN64G_CSD = "400e0032db790001dbd37f800a4040f9"


def test_sd_cid_of_a_real_sandisk_card():
    # 03 | 53 44 | 53 4e 36 34 47 | 86 | 7e 65 07 71 | 0 16b | 8d
    c = decode_cid(SN64G_CID)
    assert c.manufacturer_id == 0x03
    assert c.manufacturer_hint == "SanDisk"
    assert c.oem_id == "SD"                      # 0x53 0x44
    assert c.product_name == "SN64G"             # 53 4e 36 34 47
    assert c.revision == "8.6"                   # PRV 0x86, BCD
    assert c.serial == 0x7E650771 == 2_120_550_257
    assert c.serial_hex == "0x7e650771"
    assert c.manufactured == "2022-11"           # MDT 0x16b: year 0x16 = 22 -> 2022, month 0xb
    assert c.crc7 == 0x8D >> 1


def test_sd_csd_v2_capacity_of_a_real_card():
    # CSD_STRUCTURE = 0x40 >> 6 = 1; C_SIZE [69:48] = 0x01 & 0x3f, 0xdb, 0xd3 -> 0x1dbd3 = 121811
    c = decode_csd(SN64G_CSD)
    assert (c.structure, c.version) == (1, 2)
    assert c.c_size == 121_811
    assert c.read_bl_len == 9
    assert c.capacity_bytes == (121_811 + 1) * 512 * 1024 == 63_864_569_856
    assert c.capacity_family == "SDXC"


def test_sd_csd_v1_capacity():
    # Fixture mmcblk1: READ_BL_LEN 0xa, C_SIZE 0xee7 (bits 73:62 of 83 b9 fe), C_SIZE_MULT 7.
    c = decode_csd("002600325f5a83b9fefbff8012800055")
    assert (c.structure, c.version) == (0, 1)
    assert (c.read_bl_len, c.c_size, c.c_size_mult) == (10, 3815, 7)
    assert c.capacity_bytes == (3815 + 1) * 2 ** (7 + 2) * 2 ** 10 == 2_000_683_008
    assert c.capacity_family == "SDSC"


def test_sd_csd_v3_sduc_uses_28_bit_c_size():
    # CSD_STRUCTURE 2; C_SIZE [75:48] = 0x0400000 -> just over 2 TiB -> SDUC.
    value = (2 << 126) | (0x0400000 << 48) | 1
    c = decode_csd(f"{value:032x}")
    assert c.version == 3
    assert c.c_size == 0x400000
    assert c.capacity_bytes == (0x400000 + 1) * 512 * 1024 == 2_199_023_779_840
    assert c.capacity_family == "SDUC"


def test_mmc_cid_layout_differs_from_sd():
    # eMMC: MID 0x15, CBX 1, OID 0x00, PNM "BJNB4R", PRV 0x05 -> 0.5, PSN 0x7b7c3d3f, MDT 0x8a -> 08/(1997+10)
    c = decode_cid("150100424a4e423452057b7c3d3f8a01", "MMC")
    assert c.manufacturer_id == 0x15
    assert c.oem_id == "0x00"
    assert c.product_name == "BJNB4R"
    assert c.revision == "0.5"
    assert c.serial == 0x7B7C3D3F
    assert c.manufactured == "2007-08"


def test_mmc_csd_over_2gb_has_no_capacity_in_csd():
    value = (3 << 126) | (9 << 80) | (0xFFF << 62) | (7 << 47)
    assert decode_csd(f"{value:032x}", "MMC").capacity_bytes is None


def test_ssr_of_a_c10_u3_v30_a2_card():
    # Fixture mmcblk0's SD Status: byte 8 = 04, 10 = 90, 14 = 39, 15 = 1e, 17 = 04, 21 = 02, 24 = 02.
    ssr = ("8000000008000000040090003c2a391e0004000000020000020000000000000000000000"
           "00000000000000000000000000000000000000000000000000000000")
    s = decode_ssr(ssr)
    assert s.bus_width_bits == 4
    assert (s.speed_class, s.speed_class_code) == ("C10", 4)
    assert s.performance_move_bytes_per_s is None           # 0: not defined for C10
    assert (s.au_size_code, s.au_size_bytes) == (9, 4 * 1024 * 1024)
    assert (s.uhs_speed_grade, s.uhs_au_size_bytes) == ("U3", 4 * 1024 * 1024)
    assert s.video_speed_class == "V30"
    assert s.vsc_au_size_code == 4
    assert s.app_perf_class == "A2"
    assert s.discard_support is True and s.fule_support is False
    assert s.declared == ["C10", "U3", "V30", "A2"]


def test_ssr_of_an_old_class_4_card():
    s = decode_ssr("80000000000000000202900000" + "0" * 102)
    assert s.speed_class == "C4"
    assert s.performance_move_bytes_per_s == 2_000_000
    assert s.uhs_speed_grade is None and s.video_speed_class is None and s.app_perf_class is None
    assert s.declared == ["C4"]


def test_reserved_codes_are_shown_not_declared():
    raw = bytearray(64)
    raw[8], raw[14], raw[15], raw[21] = 7, 0x20, 45, 0x05
    s = decode_ssr(raw.hex())
    assert s.speed_class == "reserved(7)"
    assert s.uhs_speed_grade == "reserved(2)"
    assert s.video_speed_class == "reserved(45)"
    assert s.app_perf_class == "reserved(5)"
    assert s.declared == []


@pytest.mark.parametrize("fn,text", [
    (decode_cid, "0353"), (decode_csd, "zz" * 16), (decode_ssr, "00" * 63), (decode_cid, ""),
])
def test_malformed_registers_raise_one_line(fn, text):
    with pytest.raises(ValueError) as e:
        fn(text)
    assert "\n" not in str(e.value)


def test_sysfs_whitespace_and_case_are_accepted():
    assert decode_cid(SN64G_CID.upper() + "\n").product_name == "SN64G"


# --- round trips: encode by byte offsets (ratings.toml), decode by bit positions -----------------

codes = st.integers(min_value=0, max_value=15)


@given(speed=st.integers(0, 255), pm=st.integers(0, 255), au=codes, uhs=codes, uhs_au=codes,
       video=st.integers(0, 255), app=codes)
def test_ssr_byte_offsets_agree_with_bit_positions(speed, pm, au, uhs, uhs_au, video, app):
    raw = bytearray(64)
    raw[8], raw[9], raw[10] = speed, pm, au << 4
    raw[14], raw[15], raw[21] = (uhs << 4) | uhs_au, video, app
    s = decode_ssr(raw.hex())
    assert (s.speed_class_code, s.performance_move_code, s.au_size_code) == (speed, pm, au)
    assert (s.uhs_speed_grade_code, s.uhs_au_size_code, s.video_speed_class_code) == (uhs, uhs_au, video)
    assert s.app_perf_class_code == app
    assert s.au_size_bytes == AU_SIZE_BYTES.get(au)


printable = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=5, max_size=5)


@given(mid=st.integers(0, 255), oid=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=2, max_size=2),
       pnm=printable, prv=st.integers(0, 255), psn=st.integers(0, 2**32 - 1),
       year=st.integers(0, 255), month=st.integers(1, 12))
def test_sd_cid_round_trip(mid, oid, pnm, prv, psn, year, month):
    raw = bytes([mid]) + oid.encode() + pnm.encode() + bytes([prv]) + psn.to_bytes(4, "big")
    raw += bytes([year >> 4, ((year & 0xF) << 4) | month, 0x01])
    c = decode_cid(raw.hex())
    assert (c.manufacturer_id, c.oem_id, c.product_name, c.serial) == (mid, oid, pnm, psn)
    assert c.revision == f"{prv >> 4}.{prv & 0xF}"
    assert c.manufactured == f"{2000 + year:04d}-{month:02d}"
