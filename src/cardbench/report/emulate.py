"""An emulated card's status for a person (``cardbench emulate status``, ``emulate set``): one line
of settings, one of counters."""

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
    return lines


def render_emulate_status(entries: list[dict[str, Any]]) -> str:
    """Every card's status lines ("no emulated cards" when there is none), newline-terminated."""
    if not entries:
        return "no emulated cards\n"
    return "".join(line + "\n" for st in entries for line in emulate_status_lines(st))
