"""The run result, ``cardbench.result/1`` (:class:`cardbench.result.Result`): what ``run``,
``demo``, the drawer and the importers measured or read. Stored in the store's own run tables
(runs, tests, samples, claims), listed as the table of ``cardbench results``."""

from __future__ import annotations

from typing import Any

from cardbench.kinds.registry import Kind, Table, register
from cardbench.kinds.shapes import card_words, is_number, one_card
from cardbench.result import SCHEMA, Result, beyond_store
from cardbench.units import fmt_rate


def shape_problem(d: Any) -> str | None:
    """What in a cardbench.result/1 document has the wrong type (None when every field has the
    type the store and the reports rely on): a hand-edited or foreign file is refused in one line."""

    def num(x, positive=False) -> bool:
        return is_number(x) and (x > 0 if positive else x >= 0)

    if not isinstance(d, dict):
        return "not a JSON object"
    for k in ("target", "host", "tool"):
        if d.get(k) is not None and not isinstance(d[k], dict):
            return f"'{k}' must be an object"
    for k in ("id", "error", "started_at", "finished_at", "source"):
        if d.get(k) is not None and not isinstance(d[k], str):
            return f"'{k}' must be text"
    for k, numeric in (("card", ("capacity_bytes",)), ("reader", ("link_speed_mbit",))):
        v = d.get(k)
        if v is None:
            continue
        if not isinstance(v, dict):
            return f"'{k}' must be an object"
        for f, x in v.items():
            if f == "ata":
                if x is not None and not isinstance(x, dict):
                    return f"'{k}.ata' must be an object"
                continue
            if f != "identity" and x is not None and not (num(x) if f in numeric else isinstance(x, str)):
                return f"'{k}.{f}' must be {'a number' if f in numeric else 'text'}"
    for k in ("warnings", "claims", "tests"):
        if d.get(k) is not None and not isinstance(d[k], list):
            return f"'{k}' must be a list"
    if not all(isinstance(w, str) for w in d.get("warnings") or []):
        return "'warnings' must be a list of text"
    if not all(isinstance(c, dict) for c in d.get("claims") or []):
        return "'claims' must be a list of objects"
    for n, t in enumerate(d.get("tests") or [], 1):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            return f"test #{n} must be an object with a 'name'"
        for k in ("method", "extra"):
            if t.get(k) is not None and not isinstance(t[k], dict):
                return f"test #{n}: '{k}' must be an object"
        if t.get("limited_by") is not None and not isinstance(t["limited_by"], str):
            return f"test #{n}: 'limited_by' must be text"
        if not isinstance(t.get("warnings") or [], list) or not all(isinstance(w, str) for w in t.get("warnings") or []):
            return f"test #{n}: 'warnings' must be a list of text"
        for k in ("runs", "warmup"):
            runs = t.get(k) or []
            if not isinstance(runs, list):
                return f"test #{n}: '{k}' must be a list"
            for r in runs:
                if not isinstance(r, dict) or not num(r.get("bytes")) or not num(r.get("seconds"), positive=True):
                    return f"test #{n}: every run needs 'bytes' >= 0 and 'seconds' > 0"
                if r.get("ops") is not None and not num(r["ops"]) or \
                        r.get("offset") is not None and not num(r["offset"]):
                    return f"test #{n}: a run's 'ops' and 'offset' must be numbers"
                if r.get("latency_s") is not None and not (isinstance(r["latency_s"], dict) and
                                                           all(num(v) for v in r["latency_s"].values())):
                    return f"test #{n}: a run's 'latency_s' must map percentiles to seconds"
                if r.get("extra") is not None and not isinstance(r["extra"], dict):
                    return f"test #{n}: a run's 'extra' must be an object"
    return None


def load(d: dict) -> Result:
    """The Result of a document read from outside; ValueError when a count passes the store's
    integers, or its statistics cannot be computed (a run of 1e276 seconds overflows them)."""
    result = Result.from_dict(d)
    problem = beyond_store(result)
    if problem:
        raise ValueError(problem)
    try:
        for t in result.tests:      # its figures, as Result.to_dict computes them (kept: stats.summarize)
            t.to_dict()
    except ArithmeticError as e:
        raise ValueError(f"a figure too large to compute with ({e})") from None
    return result


def summary(d: dict) -> str:
    """"Lexar 4X: seq_write 10.200 MB/s, cold_read 20.100 MB/s" (each test's median)."""
    tests = [t for t in d.get("tests") or [] if isinstance(t, dict)]
    figures = ", ".join(f"{t.get('name')} {fmt_rate(t['median_bytes_per_s'])}" for t in tests
                        if is_number(t.get("median_bytes_per_s")))
    return f"{card_words(d.get('card'))}: {figures or 'no figures'}" + \
        ("" if d.get("complete", True) else " (incomplete)")


RESULT = register(Kind(
    name="result", schema=SCHEMA, section="results", noun="result", title="result",
    problem=shape_problem, cards=one_card, summary=summary,
    created=lambda d: d.get("started_at") if isinstance(d.get("started_at"), str) else None,
    table=Table("runs", "result_id", "started_epoch", card_column=True, reader_column=True, native=True),
    listed=False,               # the runs are the table of `cardbench results` itself
    load=load, dump=Result.to_dict, item_type=Result))
