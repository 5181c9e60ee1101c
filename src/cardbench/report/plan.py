"""What ``cardbench run DIR --plan`` prints: the plan (:func:`cardbench.plan.make_plan`) on the
target as it is now, each test with the bytes of the one file it writes, how often it runs, and
nothing written.

    from cardbench.plan import make_plan
    from cardbench.report.plan import plan_document, render_plan
    doc = plan_document(target, make_plan(target, opts), opts)
    print(render_plan(doc))          # or json.dumps(doc)
"""

from __future__ import annotations

from typing import Any

from cardbench.plan import file_limit
from cardbench.units import fmt_size


def plan_document(target, plan, opts) -> dict[str, Any]:
    """The plan as ``run --plan --json`` prints it: the target's free space and largest file
    (``largest_file_by``: the filesystem rule that sets it), the runs, and :meth:`Plan.to_dict`."""
    limit, limit_name = file_limit(target)
    return {"target": target.path, "filesystem": target.filesystem.describe() if target.filesystem else None,
            "free_bytes": target.space().free, "largest_file": limit, "largest_file_by": limit_name if limit else None,
            "runs": opts.runs, "warmup": opts.warmup, "duration_s": opts.duration if plan.extra else None,
            **plan.to_dict()}


def _job_line(j: dict[str, Any], duration: float | None) -> str:
    if j["name"] == "cold_read":
        what = ", reads seq_write's file back, cold"
    elif j["bytes"] is None:
        what = ""
    else:
        size = f"up to {fmt_size(j['bytes'])} (chosen by probes)" if j["auto"] else fmt_size(j["bytes"])
        what = f", {size} in one file" if j["writes"] else f", over an area of {size}"
    if j["name"] == "sustained_write":
        what += ", one pass (not repeated)"
    if duration and j["name"] not in ("seq_write", "cold_read", "sustained_write"):
        what += f", {duration:g} s a run"
    return f"  {j['name']} ({j['engine']}){what}"


def render_plan(doc: dict[str, Any]) -> str:
    """The plan in words: the answer (where, how much room), each test, the warnings."""
    head = f"{doc['target']}: {fmt_size(doc['free_bytes'])} free"
    if doc.get("largest_file"):
        head += f"; {doc['largest_file_by']} holds files up to {fmt_size(doc['largest_file'])}"
    warm = doc["warmup"]
    runs = (f"Each test: {doc['runs']} timed run{'s' if doc['runs'] != 1 else ''}"
            + (f" after {warm} untimed warm-up run{'s' if warm != 1 else ''}." if warm else ", no warm-up run."))
    lines = [head, runs] + [_job_line(j, doc.get("duration_s")) for j in doc["jobs"]]
    lines += [f"  warning: {w}" for w in doc["warnings"]]
    lines.append("Nothing was written (--plan).")
    return "\n".join(lines)
