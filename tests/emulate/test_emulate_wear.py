"""The wear model of emulated cards: known limits, each failure mode, the truth on the control
channel, counts kept over a pull. Whole-card passes with DataFile (1 MiB O_DIRECT requests) on
small unpaced cards behind one reader; every 512-byte sector carries its address and the pass."""

from __future__ import annotations

import errno
import mmap

import numpy as np
import pytest

from cardbench.emulate import CardSpec, EmulatedReader
from cardbench.emulate.wear import WearModel
from cardbench.engine.data import DataFile
from cardbench.engine.errors import IoFault
from cardbench.errors import UsageError
from cardbench.units import MB, MiB
from emulate_helpers import dio_read, dio_write, needs_emulator

pytestmark = needs_emulator

SIZE = 4 * MiB          # 64 wear blocks of 64 KiB
REQ = 1 * MiB
BLOCK = 64 * 1024
SECTORS = SIZE // 512
UNREAD = -1             # a sector whose read failed


@pytest.fixture(scope="module")
def reader():
    with EmulatedReader() as r:
        yield r


@pytest.fixture
def make_card(reader):
    """Add an unpaced card with these spec fields behind the reader; removed after the test."""
    made = []

    def make(**fields):
        spec = CardSpec(size=SIZE, write_rate=1000 * MB, read_rate=1000 * MB, name=f"w{len(made)}", **fields)
        card = reader.add_card(spec)
        made.append(card)
        card.set(paced=False)
        return card

    yield make
    for card in made:
        card.close()


def tagged(offset: int, length: int, rnd: int) -> mmap.mmap:
    """A buffer whose sectors say (sector address, round)."""
    buf = mmap.mmap(-1, length)
    words = np.frombuffer(buf, dtype=np.uint64).reshape(-1, 64)
    words[:, 0] = np.arange(offset // 512, (offset + length) // 512)
    words[:, 1] = rnd
    words[:, 2:] = 0x5A5A5A5A5A5A5A5A
    return buf


def write_pass(dev: str, rnd: int, req: int = REQ) -> list[tuple[int, int]]:
    """Write the whole card with round ``rnd``; the (offset, errno) of every failed write."""
    failed = []
    with DataFile.open(dev, write=True) as f:
        for off in range(0, SIZE, req):
            try:
                f.write_exact(tagged(off, min(req, SIZE - off), rnd), off)
            except IoFault as e:
                failed.append((off, e.errno))
        f.sync()
    return failed


def read_all(dev: str, req: int = REQ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Per sector: the address and round it says, and whether it is all 0xFF; plus the errnos of
    failed reads (their sectors say UNREAD)."""
    addr = np.full(SECTORS, UNREAD, dtype=np.int64)
    rnd = np.full(SECTORS, UNREAD, dtype=np.int64)
    ff = np.zeros(SECTORS, dtype=bool)
    errs = []
    buf = mmap.mmap(-1, req)
    with DataFile.open(dev, write=False) as f:
        for off in range(0, SIZE, req):
            s = slice(off // 512, (off + req) // 512)
            try:
                f.read_exact(buf, off)
            except IoFault as e:
                errs.append(e.errno)
                continue
            words = np.frombuffer(buf, dtype=np.uint64).reshape(-1, 64)
            addr[s], rnd[s] = words[:, 0].astype(np.int64), words[:, 1].astype(np.int64)
            ff[s] = (words == np.uint64(0xFFFFFFFFFFFFFFFF)).all(axis=1)
    return addr, rnd, ff, errs


EXPECTED = np.arange(SECTORS)


def assert_clean(dev: str, rnd: int) -> None:
    addr, got, _, errs = read_all(dev)
    assert errs == []
    assert (addr == EXPECTED).all() and (got == rnd).all()


def worn_after(wear: dict, passes: int) -> int:
    """Blocks worn after ``passes`` whole-card writes, by the limits the card reports."""
    return sum(count for limit, count in wear["limits"] if limit < passes)


# -- each mode: with no spread, pass N is clean and pass N+1 fails everywhere -------------------

N = 3


@pytest.mark.parametrize("mode", ["stale", "eio", "ff", "misplace", "readonly"])
def test_each_mode_fails_first_in_pass_n_plus_1(make_card, mode):
    card = make_card(wear_cycles=N, wear_mode=mode)
    dev = card.device
    wear = card.wear()
    assert (wear["block"], wear["blocks"], wear["limits"], wear["worn"]) == (BLOCK, 64, [[N, 64]], 0)
    for rnd in range(1, N + 1):
        assert write_pass(dev, rnd) == []
        assert_clean(dev, rnd)
    wear = card.wear()
    assert (wear["worn"], wear["cycles_min"], wear["cycles_max"], wear["passes"]) == (0, N, N, N)

    failed = write_pass(dev, N + 1)
    addr, rnd, ff, errs = read_all(dev)
    wear = card.wear()
    if mode == "stale":        # the writes were dropped: the old pass is back, and no error
        assert failed == [] and errs == []
        assert (addr == EXPECTED).all() and (rnd == N).all()
    elif mode == "eio":        # every write and every read fails
        assert failed == [(off, errno.EIO) for off in range(0, SIZE, REQ)]
        assert errs == [errno.EIO] * (SIZE // REQ) and (rnd == UNREAD).all()
    elif mode == "ff":         # erased: all 0xFF, and the writes said nothing
        assert failed == [] and errs == [] and ff.all()
    elif mode == "misplace":   # every block's write landed half the card away
        assert failed == [] and errs == []
        assert wear["misplace_shift"] == SIZE // 2
        assert (addr == (EXPECTED + SECTORS // 2) % SECTORS).all() and (rnd == N + 1).all()
    else:                      # readonly: every write fails (EROFS, passed up as EIO), reads work
        assert failed == [(off, errno.EIO) for off in range(0, SIZE, REQ)]
        assert errs == [] and (addr == EXPECTED).all() and (rnd == N).all()
        assert wear["read_only"] and card.status()["counters"]["erofs"] >= SIZE // REQ
    if mode != "readonly":     # the card turned read-only at the first worn block: the rest never wore
        assert wear["worn"] == 64 and wear["worn_blocks"] == list(range(64))
        assert not wear["read_only"]


@pytest.mark.parametrize("volatile", [0, 1 * MiB])
def test_an_eio_write_stores_its_parts_on_good_blocks(make_card, volatile):
    # a slow drain: block 1's first write is still in the volatile cache when the failing one comes
    fields = {"volatile_bytes": volatile, "drain_rate": 1 * MB} if volatile else {}
    card = make_card(wear_cycles=2, wear_mode="eio", **fields)
    if volatile:
        card.set(paced=True)         # the volatile cache works on a paced card only
    for _ in range(2):
        dio_write(card.device, 0, b"\x01" * BLOCK)
    dio_write(card.device, BLOCK, b"\x03" * BLOCK)
    for data in (b"\x02" * BLOCK, b"\x04" * 2 * BLOCK):  # block 0 wears; block 1's first write
        with pytest.raises(OSError) as e:
            dio_write(card.device, 0, data)
        assert e.value.errno == errno.EIO
    assert card.wear()["worn_blocks"] == [0]
    assert dio_read(card.device, BLOCK, BLOCK) == b"\x04" * BLOCK      # it landed, after 0x03
    if volatile:
        assert card.status()["volatile_held"] > 0
    with pytest.raises(OSError):
        dio_read(card.device, 0, 4096)
    card.set(wear_cycles=None)
    assert dio_read(card.device, 0, BLOCK) == b"\x01" * BLOCK


def test_a_pass_costs_one_cycle_whatever_the_request_size(make_card):
    card = make_card(wear_cycles=2)
    # 4 KiB requests, 192 KiB ones that end mid-block, 1 MiB, the whole card in one
    for rnd, req in enumerate((4096, 192 * 1024, REQ, SIZE), start=1):
        assert write_pass(card.device, rnd, req) == []
        wear = card.wear()
        assert wear["cycles_min"] == wear["cycles_max"] == rnd
        assert wear["worn"] == (64 if rnd > 2 else 0)


# -- a spread: the worn blocks after each pass match the limits the card reports -----------------

def test_spread_wears_blocks_as_their_limits_say(make_card):
    card = make_card(wear_cycles=4, wear_spread=0.5, wear_seed=7)
    wear = card.wear(full=True)
    limits = np.array(wear["block_limits"])
    assert [lim for lim, _ in wear["limits"]] == sorted(set(limits.tolist()))
    assert limits.min() >= 2 and limits.max() <= 6 and len(set(limits.tolist())) > 2
    assert wear["first_limit"] == limits.min() and wear["first_block"] == int(np.argmin(limits))
    # the same seed gives the same limits; another seed other ones
    assert card.wear(full=True)["block_limits"] == wear["block_limits"]
    for rnd in range(1, 9):
        assert write_pass(card.device, rnd) == []
        got = card.wear()
        assert got["worn"] == worn_after(wear, rnd) == int((limits < rnd).sum())
        # stale: a block keeps the data of the last pass it survived
        _, rounds, _, _ = read_all(card.device)
        per_block = rounds.reshape(64, -1)
        assert (per_block == np.minimum(limits, rnd)[:, None]).all()
    card.set(wear_seed=8)
    other = card.wear(full=True)
    assert other["block_limits"] != wear["block_limits"]
    assert other["passes"] == 8  # the counts stay


def test_mixed_modes_each_block_as_drawn(make_card):
    card = make_card(wear_cycles=1, wear_mode="mixed", wear_seed=3)
    wear = card.wear(full=True)
    modes = wear["block_modes"]
    assert set(modes) == {"stale", "eio", "ff", "misplace"}
    assert sum(wear["modes"].values()) == 64
    assert write_pass(card.device, 1) == []
    failed = write_pass(card.device, 2)
    # a 1 MiB write fails with EIO when one of its 16 blocks is an eio block
    assert failed == [(off, errno.EIO) for off in range(0, SIZE, REQ)
                      if "eio" in modes[off // BLOCK:(off + REQ) // BLOCK]]
    addr, rnd, ff, errs = read_all(card.device, BLOCK)
    assert errs == [errno.EIO] * modes.count("eio")
    per_block = BLOCK // 512
    for k, mode in enumerate(modes):
        s = slice(k * per_block, (k + 1) * per_block)
        if mode == "eio":
            assert (rnd[s] == UNREAD).all()
        elif mode == "ff":
            assert ff[s].all()
        else:
            # its own write was dropped or moved; the block half the card away moved its own
            # write onto it if it is a misplace block
            j = (k + 32) % 64
            if modes[j] == "misplace":
                assert (addr[s] == EXPECTED[s] + (j - k) * per_block).all() and (rnd[s] == 2).all()
            else:
                assert (addr[s] == EXPECTED[s]).all() and (rnd[s] == 1).all()


def test_readonly_at_a_fraction_of_worn_blocks(make_card):
    card = make_card(wear_cycles=4, wear_spread=0.5, wear_seed=11, wear_readonly_at=0.25)
    wear = card.wear()
    assert wear["readonly_after"] == 16
    # the first pass that wears a 16th block is the one that turns the card read-only
    turns = next(p for p in range(1, 10) if worn_after(wear, p) >= 16)
    for rnd in range(1, turns):
        assert write_pass(card.device, rnd) == []
        assert not card.wear()["read_only"]
    failed = write_pass(card.device, turns)
    assert failed and all(e == errno.EIO for _, e in failed)
    got = card.wear()
    assert got["read_only"] and got["worn"] >= 16
    assert write_pass(card.device, turns + 1) == [(off, errno.EIO) for off in range(0, SIZE, REQ)]
    assert read_all(card.device)[3] == []     # reads still work


def test_a_wraparound_fake_wears_its_real_blocks_twice_a_pass(reader):
    spec = CardSpec(size=2 * SIZE, real_size=SIZE, write_rate=1000 * MB, read_rate=1000 * MB, name="wrapworn",
                    wear_cycles=3)
    card = reader.add_card(spec)
    try:
        card.set(paced=False)
        assert write_pass(card.device, 1) == []       # the first half: one cycle each
        with DataFile.open(card.device, write=True) as f:
            for off in range(SIZE, 2 * SIZE, REQ):    # the second half lands on the same blocks
                f.write_exact(tagged(off, REQ, 1), off)
        wear = card.wear()
        assert (wear["blocks"], wear["cycles_min"], wear["cycles_max"], wear["passes"]) == (64, 2, 2, 2)
    finally:
        card.close()


def test_a_64_gib_card_keeps_its_wear_in_little_memory(reader):
    card = reader.add_card(CardSpec(size=64 << 30, write_rate=1000 * MB, read_rate=1000 * MB, name="big",
                                    wear_cycles=3000, wear_spread=0.3))
    try:
        card.set(paced=False)
        last = (64 << 30) - REQ
        for _ in range(2):
            with DataFile.open(card.device, write=True) as f:
                f.write_exact(tagged(last, REQ, 1), last)
        wear = card.wear()
        assert (wear["blocks"], wear["block"], wear["cycles_max"], wear["cycles_min"]) == (1 << 20, BLOCK, 2, 0)
        assert wear["limits"][0][0] == 2100 and wear["limits"][-1][0] == 3900
        assert card.status()["wear"]["passes"] == 2 * REQ / (64 << 30)
    finally:
        card.close()


# -- the card stays the same card -------------------------------------------------------------

def test_counts_survive_pull_and_reinsert(make_card):
    card = make_card(wear_cycles=N)
    for rnd in range(1, N):
        assert write_pass(card.device, rnd) == []
    card.pull()
    card.reinsert()
    wear = card.wear()
    assert (wear["passes"], wear["cycles_min"], wear["worn"]) == (N - 1, N - 1, 0)
    assert write_pass(card.device, N) == []
    assert write_pass(card.device, N + 1) == []
    _, rnd, _, _ = read_all(card.device)
    assert (rnd == N).all() and card.wear()["worn"] == 64


def test_a_card_worn_read_only_comes_back_read_only(make_card):
    card = make_card(wear_cycles=1, wear_mode="readonly")
    assert write_pass(card.device, 1) == []
    assert write_pass(card.device, 2)
    card.pull()
    dev = card.reinsert()
    with open(f"/sys/block/{dev.removeprefix('/dev/')}/ro") as f:
        assert f.read().strip() == "1"
    assert_clean(dev, 1)


def test_live_set_turns_wear_on_and_off(make_card):
    card = make_card()
    assert card.status()["wear"] is None
    with pytest.raises(UsageError, match="no wear model"):
        card.wear()
    assert write_pass(card.device, 1) == []
    st = card.set(wear_cycles=1, wear_mode="ff")
    assert st["wear"]["worn"] == 0 and st["wear_mode"] == "ff"
    assert write_pass(card.device, 2) == []   # wear counts from the moment it is on
    assert write_pass(card.device, 3) == []
    assert read_all(card.device)[2].all()
    assert card.set(wear_cycles=5)["wear"]["worn"] == 0    # judged again on the new limits
    assert_clean(card.device, 2)                            # its data is what it kept
    card.set(wear_cycles=None)
    assert write_pass(card.device, 4) == [] and card.status()["wear"] is None
    assert_clean(card.device, 4)


# -- the model alone ----------------------------------------------------------------------------

def test_limits_are_uniform_whole_numbers_around_the_mean():
    model = WearModel(64 << 20, 0, cycles=100, spread=0.5, seed=1, block=4096)   # 16384 blocks
    limits = model.limits
    assert limits.min() == 50 and limits.max() == 150 and len(np.unique(limits)) == 101
    assert abs(limits.mean() - 100) < 1
    assert (WearModel(64 << 20, 0, cycles=100, spread=0.5, seed=1, block=4096).limits == limits).all()
    assert WearModel(1 << 20, 0, cycles=2, spread=1.0, seed=1).limits.min() == 1     # never below 1


def test_a_short_last_block_wears_per_its_own_size():
    model = WearModel(SIZE + 4096, 0, cycles=1)
    assert (model.blocks, model.last_size) == (65, 4096)
    model.write([(0, SIZE + 4096)])
    assert model.worn_count == 0 and model.report()["cycles_min"] == 1
    # one more byte wears a block that survived its limit: the last sector of block 63
    assert model.write([(SIZE - 512, 512)]) == ([(None, 512)], 0)
    assert model.report()["worn_blocks"] == [63]
    assert model.write([(SIZE - 65536, 65536 + 4096)]) == ([(None, 65536 + 4096)], 0)
    assert model.report()["worn_blocks"] == [63, 64]


def test_the_au_is_the_default_wear_block_and_huge_cards_get_bigger_blocks():
    assert WearModel(SIZE, 1 << 20, cycles=5).block == 1 << 20
    model = WearModel(1 << 40, 0, cycles=5)             # 1 TiB: 16 Mi blocks of 64 KiB would be too many
    assert (model.block, model.blocks) == (256 * 1024, 1 << 22)


# -- bad values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, message", [
    ({"wear_cycles": 0}, "wear_cycles must be a whole number of writes >= 1"),
    ({"wear_cycles": 2.5}, "wear_cycles must be a whole number of writes >= 1"),
    ({"wear_cycles": 3, "wear_spread": 1.5}, "wear_spread must be a number from 0 to 1"),
    ({"wear_cycles": 3, "wear_mode": "melt"}, "wear_mode must be one of stale, eio, ff, misplace, readonly, mixed"),
    ({"wear_cycles": 3, "wear_block": 1000}, "wear_block must be a multiple of 512 B"),
    ({"wear_cycles": 3, "wear_block": 8 * MiB}, "wear_block (8388608 B) is larger than the card"),
    ({"wear_cycles": 3, "wear_block": 4 * MiB, "wear_mode": "misplace"}, "needs at least two whole wear blocks"),
    ({"wear_cycles": 3, "wear_readonly_at": 0}, "wear_readonly_at must be a number above 0 and up to 1"),
    ({"wear_cycles": 3, "wear_seed": -1}, "wear_seed must be a whole number >= 0"),
])
def test_bad_wear_values_get_one_line(fields, message):
    with pytest.raises(UsageError) as e:
        CardSpec(size=SIZE, write_rate=MB, read_rate=MB, **fields)
    assert message in e.value.message and "\n" not in e.value.message


def test_bad_live_wear_value_changes_nothing(make_card):
    card = make_card(wear_cycles=2)
    with pytest.raises(UsageError, match="wear_mode must be one of"):
        card.set(wear_mode="melt")
    with pytest.raises(UsageError, match="larger than the card"):
        card.set(wear_block=8 * MiB)
    assert card.wear()["block"] == BLOCK and card.status()["wear_block"] == 0
