"""One rule for "genuine" (verify/verdict.py): cardbench's own full verify and an imported f3read log
of the same damage (same lost ranges, same size) get the same verdict; rules on models, no I/O."""

from __future__ import annotations

import pytest

from cardbench.importers import import_text
from cardbench.patterns import CLASSES, SECTOR
from cardbench.verify.full_run import FillRun
from cardbench.verify.verdict import at_end, file_losses, in_card_order, judge_fill

FILE_SECTORS = 2048           # 1 MiB "files" (f3's are 1 GiB; the rule does not care)
FILES = 8


def _f3_size(sectors: int) -> str:
    """A size as f3's adjust_unit prints it (divides by 1024, two decimals)."""
    value, units = float(sectors * SECTOR), ["Byte", "KB", "MB", "GB", "TB"]
    i = 0
    while value >= 1024 and i < len(units) - 1:
        value /= 1024
        i += 1
    return f"{value:.2f} {units[i]}"


def f3read_log(files: list[dict[str, int]]) -> str:
    """f3read 8.0's output for files with these sector counts (ok, corrupted, changed, overwritten)."""
    lines = ["F3 read 8.0", "Copyright (C) 2010 Digirati Internet LTDA.", "",
             "                  SECTORS      ok/corrupted/changed/overwritten"]
    for i, c in enumerate(files, 1):
        lines.append(f"Validating file {i}.h2w ... {c['ok']:>8}/{c['corrupted']:>9}/{c['changed']:>7}/"
                     f"{c['overwritten']:>7}")
    tot = {k: sum(c[k] for c in files) for k in ("ok", "corrupted", "changed", "overwritten")}
    lost = tot["corrupted"] + tot["changed"] + tot["overwritten"]
    lines += ["", f"  Data OK: {_f3_size(tot['ok'])} ({tot['ok']} sectors)",
              f"Data LOST: {_f3_size(lost)} ({lost} sectors)",
              f"\t       Corrupted: {_f3_size(tot['corrupted'])} ({tot['corrupted']} sectors)",
              f"\tSlightly changed: {_f3_size(tot['changed'])} ({tot['changed']} sectors)",
              f"\t     Overwritten: {_f3_size(tot['overwritten'])} ({tot['overwritten']} sectors)",
              "Average reading speed: 20.00 MB/s", ""]
    return "\n".join(lines)


def own_full_verify(files: list[dict[str, int]]) -> dict:
    """cardbench's full verify document (FillRun.finish, the code `verify --full` runs) of a fill whose
    files read back with these counts, each file's lost sectors at its end (where f3's are placed)."""
    run = FillRun(progress=None, seed=1, file_bytes=FILE_SECTORS * SECTOR, resume=False, max_bytes=None)
    run.new_state({"file_bytes": FILE_SECTORS * SECTOR})
    run.state["phase"] = "done"
    base = 0
    for i, c in enumerate(files, 1):
        size = FILE_SECTORS * SECTOR
        counts = {k: 0 for k in CLASSES}
        counts.update(ok=c["ok"], zero=c["corrupted"], changed=c["changed"], overwritten=c["overwritten"])
        runs, at = [], base + c["ok"] * SECTOR
        for cls, key in (("overwritten", "overwritten"), ("changed", "changed"), ("zero", "corrupted")):
            if c[key]:
                runs.append([at, at + c[key] * SECTOR, cls])
                at += c[key] * SECTOR
        unit = {"name": f"{i}.h2w", "index": i, "base": base, "written": size, "complete": True,
                "read": {"counts": counts, "read_error_bytes": 0, "seconds": 0.05, "bytes_per_s": size / 0.05,
                         "first_bad": runs[0][0] - base if runs else None, "bad_runs": runs, "misplaced": []}}
        run.state["units"].append(unit)
        run.absorb(unit)
        base += size
    run.finish(announced=base, device=None, offset_on_device=0, physical_ok=False, whole_size=None)
    return run.doc


def files_with(losses: dict[int, dict[str, int]]) -> list[dict[str, int]]:
    out = []
    for i in range(1, FILES + 1):
        c = {"corrupted": 0, "changed": 0, "overwritten": 0, **losses.get(i, {})}
        c["ok"] = FILE_SECTORS - c["corrupted"] - c["changed"] - c["overwritten"]
        out.append(c)
    return out


SCATTERED_5PCT = files_with({i: {"corrupted": 103} for i in range(1, FILES + 1)})   # ~5% of every file
CASES = {
    "nothing lost": (files_with({}), ("genuine", None)),
    "5% lost, scattered over every file": (SCATTERED_5PCT, ("damaged", None)),
    "30% lost, scattered": (files_with({i: {"corrupted": 600} for i in range(1, FILES + 1)}), ("damaged", None)),
    "lost only at the end of the data": (files_with({6: {"corrupted": 1000}, 7: {"corrupted": FILE_SECTORS},
                                                     8: {"corrupted": FILE_SECTORS}}), ("counterfeit", "dropped")),
    "the last file's end lost": (files_with({8: {"corrupted": 300}}), ("counterfeit", "dropped")),
    "lost in the middle only": (files_with({4: {"corrupted": FILE_SECTORS}}), ("damaged", None)),
    "sectors from another position": (files_with({1: {"overwritten": 500}}), ("counterfeit", "wraparound")),
    "slightly changed": (files_with({3: {"changed": 2}}), ("damaged", None)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_f3_log_and_own_full_verify_of_the_same_damage_get_the_same_verdict(name):
    files, expected = CASES[name]
    own = own_full_verify(files)
    f3 = import_text(f3read_log(files)).verify_docs[0]
    assert (own["verdict"], own["kind"]) == expected
    assert (f3["verdict"], f3["kind"]) == expected
    assert f3["announced_bytes"] == own["written_bytes"] == FILES * FILE_SECTORS * SECTOR
    assert f3["lost_bytes"] == own["lost_bytes"]


def test_losses_at_the_end_of_the_data():
    mib = 1 << 20
    assert at_end([(90 * mib, 100 * mib)], 100 * mib)
    assert at_end([(80 * mib, 85 * mib), (86 * mib, 100 * mib)], 100 * mib)
    assert not at_end([(10 * mib, 11 * mib), (99 * mib, 100 * mib)], 100 * mib)   # scattered
    assert not at_end([(50 * mib, 60 * mib)], 100 * mib)                          # does not reach the end
    assert not at_end([], 100 * mib)
    assert file_losses([(100, 0), (100, 30), (100, 100)]) == [[170, 200], [200, 300]]
    assert judge_fill(written=100 * mib, unplaced=mib) == ("damaged", None)       # nowhere known: not the end


def test_h2testw_is_judged_by_the_same_rule():
    """An H2testw log whose data is lost from its first error to the end is counterfeit; the same count of
    lost sectors starting early (so not only at the end) is damage; its own sentence is kept."""
    def log(first_error: int) -> str:
        return ("The media is likely to be defective.\n7.8 GByte OK (16383999 sectors)\n"
                "21.8 GByte DATA LOST (45748225 sectors)\nDetails:0 KByte overwritten (0 sectors)\n"
                "0 KByte slightly changed (< 8 bit/sector, 0 sectors)\n21.8 GByte corrupted (45748225 sectors)\n"
                "0 KByte aliased memory (0 sectors)\n"
                f"First error at offset: 0x{first_error:016x}\nH2testw v1.4\n")
    fake = import_text(log(16383999 * SECTOR)).verify_docs[0]
    assert (fake["verdict"], fake["kind"]) == ("counterfeit", "dropped")
    assert fake["tool_verdict"] == "The media is likely to be defective."
    early = import_text(log(0)).verify_docs[0]
    assert (early["verdict"], early["kind"]) == ("damaged", None)


def test_the_tools_own_sentence_is_shown_beside_the_verdict():
    from cardbench.report.verify import verify_details
    doc = import_text("The media is likely to be defective.\n7.8 GByte OK (16383999 sectors)\n"
                      "0 KByte DATA LOST (0 sectors)\nH2testw v1.4\n").verify_docs[0]
    rows = dict(verify_details(doc))
    assert rows["verdict"] == "GENUINE" and rows["H2testw said"] == "The media is likely to be defective."


def test_losses_are_judged_in_the_cards_order_not_the_fills():
    """A filesystem places fill files where it likes: a fake card of 6 real units out of 8, its fill
    files written to card units 6, 0, 1, 2, 3, 4, 5, 7 (the first file in a block group near the
    end), loses the first and the last file: scattered in fill order, but the end of the card's data."""
    unit = 1 << 20
    data = [(k * unit, unit) for k in (6, 0, 1, 2, 3, 4, 5, 7)]                 # fill order
    lost_on_card = [(6 * unit, unit), (7 * unit, unit)]
    fill_order = [[0, unit], [7 * unit, 8 * unit]]
    assert judge_fill(written=8 * unit, lost=fill_order)[0] == "damaged"
    card_order = in_card_order(data, lost_on_card)
    assert card_order == [[6 * unit, 8 * unit]]
    assert judge_fill(written=8 * unit, lost=card_order) == ("counterfeit", "dropped")
    # scattered on the card too: damage
    scattered = in_card_order(data, [(1 * unit, unit), (4 * unit, unit)])
    assert judge_fill(written=8 * unit, lost=scattered)[0] == "damaged"
    # a lost piece spanning two adjacent extents, and one outside the data (ignored)
    assert in_card_order([(0, 10), (10, 10), (100, 5)], [(5, 10), (50, 3)]) == [[5, 15]]


def test_a_test_cut_short_by_the_device_going_away_draws_no_verdict():
    """The one rule (issue 24): a test that stopped because the device went away (pulled, its
    medium taken out) has no verdict from what it could not read or write; a card that stopped
    answering but is still there is damaged; what was read back before still counts."""
    from cardbench.verify.verdict import judge
    GiB = 1 << 30
    assert judge(whole=GiB, stopped=True, gone=True) == (None, None)
    assert judge(whole=GiB, stopped=True) == ("damaged", None)          # still there, answers nothing
    assert judge(whole=GiB, stopped=True, gone=True, damaged=True) == ("damaged", None)   # changed data seen
    assert judge(whole=GiB, stopped=True, gone=True, wrapped=True) == ("counterfeit", "wraparound")
    assert judge_fill(written=GiB, stopped=True, gone=True) == (None, None)
    assert judge_fill(written=GiB, lost=[(GiB // 2, GiB)], stopped=True, gone=True) == ("counterfeit", "dropped")
