"""An emulated card's status for a person (``cardbench emulate status``, ``emulate set``): one line
of settings, one of counters, one of wear (a card with a wear model); and its wear model's truth
(``cardbench emulate wear``)."""

from __future__ import annotations

from typing import Any

from cardbench.units import fmt_rate, fmt_size


def emulate_status_lines(st: dict[str, Any]) -> list[str]:
    """The lines for one card's status (as :func:`cardbench.emulate.manage.status` gives it)."""
    name = st.get("name")
    if not st.get("running", True):
        return [f"{name}: not running (stale state in {st.get('workdir')}; run: cardbench emulate stop {name})"]
    c = st.get("counters", {})
    size = st.get("size")
    shown = f"{fmt_size(size, binary=True)} ({fmt_size(size)})" if size and size % (1 << 20) == 0 else fmt_size(size)
    line = [f"{name}: {st.get('device') or '-'}", f"size {shown}",
            f"write {fmt_rate(st.get('write_rate'))}", f"read {fmt_rate(st.get('read_rate'))}"]
    if st.get("latency"):
        line.append(f"latency {st['latency'] * 1e3:g} ms")
    if st.get("real_size"):
        line.append(f"fake: keeps {fmt_size(st['real_size'], binary=True)} ({st.get('fake_mode')})")
    if st.get("cache_bytes"):
        line.append(f"cache {fmt_size(st['cache_bytes'])} at {fmt_rate(st.get('cache_rate'))} "
                    f"after {st.get('cache_idle'):g} s idle")
    if st.get("ceiling"):
        line.append(f"reader ceiling {fmt_rate(st['ceiling'])}")
    if st.get("errors"):
        line.append("EIO on " + ", ".join(f"[{a}, {b}) {k}" for a, b, k in st["errors"]))
    if st.get("yanked"):
        line.append("YANKED")
    if st.get("paced") is False:
        line.append("unpaced")
    lines = [", ".join(line)]
    if c:
        lines.append(f"  {c.get('writes', 0)} writes ({fmt_size(c.get('bytes_written', 0))}), "
                     f"{c.get('reads', 0)} reads ({fmt_size(c.get('bytes_read', 0))}), {c.get('eio', 0)} EIO")
    w = st.get("wear")
    if w:
        spread = f" ±{st.get('wear_spread', 0) * 100:g}%" if st.get("wear_spread") else ""
        cycles = st.get("wear_cycles")
        worn = (f"  wear: {cycles} write{'s' if cycles != 1 else ''}{spread} per {fmt_size(w['block'], binary=True)} block, "
                f"{st.get('wear_mode')}; {w['passes']:.1f} whole-card writes, {w['worn']} of {w['blocks']} "
                f"blocks worn")
        lines.append(worn + (", READ-ONLY" if w.get("read_only") else ""))
    return lines


def render_wear(name: str, w: dict[str, Any]) -> str:
    """An emulated card's wear model (as :meth:`cardbench.emulate.EmulatedCard.wear` gives it):
    what it is set to, how far it got, and when its blocks wear out."""
    spread = f" ±{w['spread'] * 100:g}%" if w.get("spread") else ""
    out = [f"{name}: {w['blocks']} wear blocks of {fmt_size(w['block'], binary=True)}, "
           f"{w['cycles']} write{'s' if w['cycles'] != 1 else ''} each{spread} (seed {w['seed']}), worn blocks: {w['mode']}"]
    if w.get("readonly_after") is not None:
        out.append(f"  turns read-only at {w['readonly_after']} worn block(s)")
    out.append(f"  {w['passes']:.2f} whole-card writes so far (per block {w['cycles_min']:g} to "
               f"{w['cycles_max']:g}); {w['worn']} blocks worn" + ("; READ-ONLY" if w.get("read_only") else ""))
    first, total = w["limits"][0][0], 0
    steps = []
    for limit, count in w["limits"]:
        total += count
        steps.append(f"{total} by pass {limit + 1}")
    out.append(f"  first worn: block {w['first_block']} in pass {first + 1}; worn blocks: "
               + ", ".join(steps[:6]) + (", ..." if len(steps) > 6 else ""))
    return "".join(line + "\n" for line in out)


def render_emulate_status(entries: list[dict[str, Any]]) -> str:
    """Every card's status lines ("no emulated cards" when there is none), newline-terminated."""
    if not entries:
        return "no emulated cards\n"
    return "".join(line + "\n" for st in entries for line in emulate_status_lines(st))
