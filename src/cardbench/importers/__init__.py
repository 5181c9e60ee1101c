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
            report.results.append(Result.from_dict(d))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise UsageError(f"{path}: result #{i + 1} cannot be read: {e}") from None
    return report


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
        return import_fio(doc, path=path, digest=digest, card=card, reader=reader)
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
