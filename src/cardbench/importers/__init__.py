"""Read results made elsewhere: hand-made surveys, fio runs, and cardbench's own export.

    from cardbench.importers import import_file
    report = import_file("drawer.txt", file_size="42MB")
    for line in report.lines(): print(line)        # what was read, every flag, every skipped line
    with open_store() as s: report.save_to(s)

Formats (``fmt``; detected from the content when None):

* ``cardbench``: cardbench's export, ``{"schema": "cardbench.results/1", "results": [...]}`` (also
  one ``cardbench.result/1`` document, or a list of them). Read back identically: same ids,
  same source, same figures.
* ``fio``: ``fio --output-format=json`` output (cardbench.importers.fio); source ``import-fio``.
* ``table``: the classic whitespace table of a hand-made survey (cardbench.importers.classic).
* ``csv``: a legacy CSV survey, columns recognised by name (cardbench.importers.legacy_csv).

Surveys (table, csv) are recomputed from their raw write times and the file size, and every
printed figure that disagrees with the row's own raw data beyond rounding is flagged
(``report.flags``; cardbench.importers.checks). Their results get source ``import``.
Detection: JSON with a cardbench schema -> cardbench; JSON with ``jobs`` -> fio; text with an
``average`` column -> table; else text whose first line has two or more ``,``/``;``/tabs -> csv;
else table.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from cardbench.errors import UsageError
from cardbench.importers.base import DEFAULT_FILE_SIZE, DEFAULT_FILE_SIZE_TEXT, ImportReport, Skipped
from cardbench.importers.checks import Flag
from cardbench.result import SCHEMA as RESULT_SCHEMA
from cardbench.result import Card, Result

RESULTS_SCHEMA = "cardbench.results/1"
FORMATS = ("cardbench", "fio", "table", "csv")
_ALIASES = {"json": "cardbench", "native": "cardbench", "classic": "table", "txt": "table", "fio-json": "fio"}

__all__ = ["import_file", "import_text", "ImportReport", "Flag", "Skipped", "DEFAULT_FILE_SIZE",
           "DEFAULT_FILE_SIZE_TEXT", "FORMATS", "detect_format"]


def detect_format(text: str) -> str:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise UsageError(f"looks like JSON but cannot be parsed: {e}") from None
        return _json_kind(doc)
    from cardbench.importers.classic import has_average_column
    if has_average_column(text):
        return "table"
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    if max(first.count(","), first.count(";"), first.count("\t")) >= 2:
        return "csv"
    return "table"


def _json_kind(doc) -> str:
    if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("cardbench.result"):
        return "cardbench"
    if isinstance(doc, list) and doc and all(isinstance(d, dict) and d.get("schema") == RESULT_SCHEMA for d in doc):
        return "cardbench"
    if isinstance(doc, dict) and ("fio version" in doc or isinstance(doc.get("jobs"), list)):
        return "fio"
    schema = doc.get("schema") if isinstance(doc, dict) else None
    raise UsageError("JSON that is neither a cardbench export (schema cardbench.results/1) nor fio "
                     f"--output-format=json output" + (f" (schema {schema!r})" if schema else ""))


def import_cardbench(doc, *, path: str) -> ImportReport:
    if isinstance(doc, list):
        docs = doc
    elif doc.get("schema") == RESULTS_SCHEMA:
        docs = doc.get("results")
        if not isinstance(docs, list):
            raise UsageError(f"{path}: {RESULTS_SCHEMA} document without a 'results' list")
    elif doc.get("schema") == RESULT_SCHEMA:
        docs = [doc]
    else:
        raise UsageError(f"{path}: unknown cardbench schema {doc.get('schema')!r} (this cardbench reads "
                         f"{RESULTS_SCHEMA} and {RESULT_SCHEMA}); a newer cardbench may have written it")
    report = ImportReport(path=path, format="cardbench")
    for i, d in enumerate(docs):
        try:
            problem = _shape_problem(d)
            if problem:
                raise ValueError(problem)
            report.results.append(Result.from_dict(d))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise UsageError(f"{path}: result #{i + 1} cannot be read: {e}") from None
    return report


def _shape_problem(d) -> str | None:
    """What in a cardbench.result/1 document has the wrong type (None when every field has the
    type the store and the reports rely on): a hand-edited or foreign file is refused in one line."""
    import math

    def num(x, positive=False) -> bool:
        ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
        return ok and (x > 0 if positive else x >= 0)

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


def import_text(text: str, *, path: str = "<text>", fmt: str | None = None, file_size: int | str | None = None,
                reader: str | None = None, card: Card | None = None) -> ImportReport:
    """Like import_file, on text already read."""
    fmt = _ALIASES.get(fmt, fmt) if fmt else detect_format(text)
    if fmt not in FORMATS:
        raise UsageError(f"unknown import format {fmt!r} (use one of {', '.join(FORMATS)})")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if fmt in ("cardbench", "fio"):
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise UsageError(f"{path}: not valid JSON: {e}") from None
        if fmt == "cardbench":
            if not isinstance(doc, (dict, list)):
                raise UsageError(f"{path}: not a cardbench export")
            return import_cardbench(doc, path=path)
        from cardbench.importers.fio import import_fio
        try:
            return import_fio(doc, path=path, digest=digest, card=card, reader=reader)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            # a field of the wrong type or shape: bad input in one line, not an internal error
            raise UsageError(f"{path}: fio JSON that cardbench cannot read ({type(e).__name__}: {e})") from None
    if fmt == "table":
        from cardbench.importers.classic import import_table
        report = import_table(text, path=path, digest=digest, file_size=file_size, reader=reader)
    else:
        from cardbench.importers.legacy_csv import import_csv
        report = import_csv(text, path=path, digest=digest, file_size=file_size, reader=reader)
    if card is not None:
        report.notes.append("--card applies to fio imports only; survey rows name their cards")
    return report


def import_file(path: str | os.PathLike, fmt: str | None = None, *, file_size: int | str | None = None,
                reader: str | None = None, card: Card | None = None) -> ImportReport:
    """Read results from a file (see the module docstring for formats and detection).

    ``file_size``: bytes, or a size like "42MB" / "42MiB", that a survey's write times refer to
    (default 42 MB = 42,000,000 B, or a ``# file size: ...`` line in the file). ``reader``: the
    reader's name for rows that do not name one. ``card``: the card of a fio run.
    Raises UsageError (one line) for unreadable input.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no such file: {p}") from None
    except IsADirectoryError:
        raise UsageError(f"{p} is a directory, not a file to import") from None
    except OSError as e:
        raise UsageError(f"cannot read {p}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            text = data.decode("latin-1") if b"\x00" not in data else None
        except UnicodeDecodeError:
            text = None
        if text is None:
            raise UsageError(f"{p} is not a text file (CSV, table or JSON)") from None
    if not text.strip():
        raise UsageError(f"{p} is empty")
    return import_text(text, path=str(p), fmt=fmt, file_size=file_size, reader=reader, card=card)
