#!/usr/bin/env python3
"""`cardbench verify` (quick mode) side by side with `f3probe --destructive --time-ops`.

Same emulated cards (cardbench.emulate: real loop devices paced in userspace), in the same run,
each tool on a fresh card of the same spec: genuine and counterfeit, wraparound and dropped
writes, with and without a write cache (a fast first stretch of writes, 64 MiB at 4x the card's
rate: more than a naive probe writes). Paced like a card behind a USB 2.0 reader: 20 MB/s
write, 40 MB/s read.

Prints, per card: the truth, each tool's verdict and usable size, the wall times and the ratio
cardbench / f3probe (goal: <= 1), for cardbench in destructive mode (like f3probe --destructive)
as a library call and as the command line (Python start-up included), and for information the
default non-destructive mode (every overwritten byte journaled and put back). Then f3probe's
own emulation (its hidden --debug options) of a wraparound card, to show whether a verdict that
differs comes from the emulator or from f3probe (f3probe 8.0 calls such cards "damaged", usable
size 0, with its own emulator too).

Usage: sudo python3 bench/verify_vs_f3probe.py [--quick] [--rate MB/s]
  --quick   smaller cards (256 MiB), for a fast look
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from cardbench.emulate import CardSpec, EmulatedCard  # noqa: E402
from cardbench.target import open_target  # noqa: E402
from cardbench.units import MB, MiB  # noqa: E402
from cardbench.verify.quick import verify_device  # noqa: E402

CLI = """
import sys
from cardbench.cli import cli, main
from cardbench.cli.verify_cmd import verify
if "verify" not in cli.commands:
    cli.add_command(verify)
main(sys.argv[1:])
"""


def cards(size: int, rate: float) -> list[tuple[str, dict]]:
    cache = dict(cache_bytes=64 * MiB, cache_rate=4 * rate)
    q = size // 4
    odd = size * 3 // 10 // 512 * 512 + 3584
    return [
        ("genuine", dict(size=size)),
        ("genuine + write cache", dict(size=size, **cache)),
        ("wraparound at 1/4 (power of 2)", dict(size=size, real_size=q, fake_mode="wraparound")),
        ("wraparound at 0.3 (any size)", dict(size=size, real_size=odd, fake_mode="wraparound")),
        ("wraparound + write cache", dict(size=size, real_size=q, fake_mode="wraparound", **cache)),
        ("dropped at 1/4", dict(size=size, real_size=q, fake_mode="drop")),
        ("dropped at 0.3 + write cache", dict(size=size, real_size=odd, fake_mode="drop", **cache)),
    ]


def run_f3probe(dev: str) -> dict:
    t0 = time.monotonic()
    p = subprocess.run(["f3probe", "--destructive", "--time-ops", dev], capture_output=True, text=True)
    wall = time.monotonic() - t0
    out = p.stdout + p.stderr
    if "is the real thing" in out:
        verdict = "genuine"
    elif "counterfeit" in out:
        verdict = "counterfeit"
    elif "damaged" in out:
        verdict = "damaged"
    else:
        verdict = f"? (exit {p.returncode})"
    m = re.search(r"\*Usable\* size:.*\((\d+) blocks\)", out)
    usable = int(m.group(1)) * 512 if m else None
    kind = re.search(r"counterfeit of type (\w+)", out)
    return {"verdict": verdict, "usable": usable, "kind": kind.group(1) if kind else None, "wall": wall}


def run_lib(dev: str, destructive: bool, journal: str) -> dict:
    t0 = time.monotonic()
    doc = verify_device(open_target(dev, kinds=("device",), whole_device=True), destructive=destructive, journal_dir=journal)
    return {"verdict": doc["verdict"], "usable": doc["usable_bytes"], "kind": doc["kind"],
            "wall": time.monotonic() - t0, "written": doc["method"].get("bytes_written")}


def run_cli(dev: str, size: int) -> dict:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", CLI, "verify", dev, "--destructive", "--confirm", str(size),
                        "--json", "--no-save"], capture_output=True, text=True)
    wall = time.monotonic() - t0
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return {"verdict": f"? {p.stderr.strip()[:60]}", "usable": None, "wall": wall}
    return {"verdict": doc["verdict"], "usable": doc["usable_bytes"], "wall": wall}


def fmt_usable(u: int | None) -> str:
    return "-" if u is None else f"{u / MiB:9.2f} MiB"


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("run as root (loop devices, FUSE)")
    quick = "--quick" in sys.argv
    rate = 20 * MB
    if "--rate" in sys.argv:
        rate = float(sys.argv[sys.argv.index("--rate") + 1]) * MB
    size = (256 if quick else 1024) * MiB
    journal = tempfile.mkdtemp(prefix="cardbench-bench-journal-")
    print(f"cards of {size // MiB} MiB paced at {rate / MB:g} MB/s write, {2 * rate / MB:g} MB/s read; "
          f"f3probe: {subprocess.run(['f3probe', '--version'], capture_output=True, text=True).stdout.split(chr(10))[0]}")
    print(f"{'card':<32} {'truth':>13} | {'f3probe':<24} {'s':>7} | {'cardbench -d':<24} {'s':>6} {'ratio':>6} |"
          f" {'CLI -d s':>8} {'ratio':>6} | {'cardbench (keeps data)':<24} {'s':>6} {'ratio':>6}")
    ratios, cli_ratios, agree = [], [], 0
    rows = cards(size, rate)
    for name, kw in rows:
        spec_kw = dict(write_rate=rate, read_rate=2 * rate, **kw)
        truth_v = "genuine" if kw.get("real_size") is None else "counterfeit"
        truth_u = kw.get("real_size") or kw["size"]
        res = {}
        for tool in ("f3probe", "lib", "cli", "keep"):
            with EmulatedCard(CardSpec(**spec_kw)) as c:
                if tool == "f3probe":
                    res[tool] = run_f3probe(c.device)
                elif tool == "lib":
                    res[tool] = run_lib(c.device, True, journal)
                elif tool == "cli":
                    res[tool] = run_cli(c.device, kw["size"])
                else:
                    res[tool] = run_lib(c.device, False, journal)
        f, lb, cl, kp = res["f3probe"], res["lib"], res["cli"], res["keep"]
        r = lb["wall"] / f["wall"]
        rc = cl["wall"] / f["wall"]
        ratios.append(r)
        cli_ratios.append(rc)
        same = f["verdict"] == lb["verdict"]
        agree += same
        print(f"{name:<32} {truth_v[:7]} {truth_u / MiB:5.0f}M | {f['verdict'][:11]:<11} {fmt_usable(f['usable']):>12} "
              f"{f['wall']:7.2f} | {lb['verdict'][:11]:<11} {fmt_usable(lb['usable']):>12} {lb['wall']:6.2f} {r:6.3f} |"
              f" {cl['wall']:8.2f} {rc:6.3f} | {kp['verdict'][:11]:<11} {fmt_usable(kp['usable']):>12} {kp['wall']:6.2f}"
              f" {kp['wall'] / f['wall']:6.3f}" + ("" if same else "   <- verdicts differ"))
        ok_lib = lb["verdict"] == truth_v and lb["usable"] is not None and abs(lb["usable"] - truth_u) <= truth_u // 100
        ok_f3 = f["verdict"] == truth_v and f["usable"] is not None and abs(f["usable"] - truth_u) <= truth_u // 100
        print(f"{'':<32} {'right?':>13} | {'yes' if ok_f3 else 'NO':<24} {'':>7} | {'yes' if ok_lib else 'NO':<24}")
    total_f3 = sum(1 for _ in rows)
    print()
    print(f"same verdict on {agree} of {total_f3} cards")
    geo = lambda xs: __import__("math").exp(sum(__import__("math").log(x) for x in xs) / len(xs))  # noqa: E731
    print(f"wall time cardbench/f3probe (destructive, library): max {max(ratios):.3f}, geometric mean {geo(ratios):.3f}")
    print(f"wall time cardbench/f3probe (destructive, command line): max {max(cli_ratios):.3f}, "
          f"geometric mean {geo(cli_ratios):.3f}")
    # Where the verdicts differ on wraparound cards: is it the emulator or f3probe? f3probe's own
    # emulation (hidden --debug options, a file instead of a device) of the same card answers.
    q = size // 4
    wrap = q.bit_length() - 1
    with tempfile.TemporaryDirectory() as d:
        img = os.path.join(d, "f3probe-emulated.img")
        p = subprocess.run(["f3probe", f"--debug-real-size={q}", f"--debug-fake-size={size}", f"--debug-wrap={wrap}",
                            "--debug-block-order=9", img], capture_output=True, text=True)
    line = next((ln for ln in p.stdout.splitlines() if "news" in ln), p.stdout.strip()[-80:])
    print(f"cross-check, f3probe's own emulation of a {size // MiB} MiB card that wraps at {q // MiB} MiB "
          f"(--debug-real-size={q} --debug-fake-size={size} --debug-wrap={wrap}): {line.strip()}")


if __name__ == "__main__":
    main()
