"""Read results made elsewhere: peer tools, hand-made surveys, and cardbench's own export.

    from cardbench.importers import import_file
    report = import_file("drawer.txt", file_size="42MB")
    for line in report.lines(): print(line)        # what was read, the unit convention, every flag
    with open_store() as s: report.save_to(s)

Formats (``fmt``; recognised by content when None, in this order):

* ``cardbench``: cardbench's export, ``cardbench.export/2`` (results, verify documents, reader
  probes, drawer sessions: :mod:`cardbench.store.export`), or the older ``{"schema":
  "cardbench.results/1", "results": [...]}`` (also one ``cardbench.result/1`` document, or a list
  of them). Read back identically, with the same ids.
* ``fio``: ``fio --output-format=json`` / ``json+``, fio 2.x and 3.x (importers.fio, fiojson).
* ``fio-terse``: ``fio --minimal``, terse versions 3 and 4 (importers.fio).
* ``fio-normal``: fio's default human output, 2.x and 3.x (importers.fio_normal).
* ``kdiskmark``: KDiskMark's text export, 1.4 to 3.x (importers.diskmark).
* ``crystaldiskmark``: CrystalDiskMark's text export, 5.x to 9.x (importers.diskmark).
* ``f3``: f3write and/or f3read output; ``f3probe``: f3probe output; ``h2testw``: H2testw's
  log. These become ``cardbench.verify/1`` documents (``report.verify_docs``), not speeds
  (importers.f3); their write and read speeds go into the document's ``timings``.
* ``hdparm``: ``hdparm -t`` / ``-T``; ``dd``: dd's closing line(s) (importers.hdparm_dd).
* ``table``: the classic whitespace table of a hand-made survey (importers.classic).
* ``csv``: a legacy CSV survey, columns recognised by name (importers.legacy_csv).

Every importer stores rates in bytes per second, says in ``report.convention`` which unit
convention it applied and why, flags every printed figure that disagrees with its own raw data
(``report.flags``; importers.checks), keeps each row's raw text in its test's ``extra["raw"]``,
and gives each result an id from the file's content, so importing a file again replaces its
earlier import. A truncated or mangled export is refused in one line naming the line or key,
with nothing imported; a file of none of these formats, in one line listing the formats tried.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from cardbench import kinds
from cardbench.errors import UsageError
from cardbench.fiojson import load_fio_json
from cardbench.importers import diskmark, f3, fio, fio_normal, hdparm_dd
from cardbench.importers.base import (
    DEFAULT_FILE_SIZE,
    DEFAULT_FILE_SIZE_TEXT,
    ImportReport,
    Skipped,
)
from cardbench.importers.checks import Flag
from cardbench.importers.classic import has_average_column, import_table
from cardbench.importers.fio import import_fio, import_terse
from cardbench.importers.fio_normal import import_fio_normal, is_fio_normal
from cardbench.importers.legacy_csv import import_csv
from cardbench.result import SCHEMA as RESULT_SCHEMA
from cardbench.result import Card
from cardbench.store.export import read_export
from cardbench.units import UnitError, check_json_numbers

RESULTS_SCHEMA = "cardbench.results/1"
FORMATS = ("cardbench", "fio", "fio-terse", "fio-normal", "kdiskmark", "crystaldiskmark", "f3", "f3probe", "h2testw", "hdparm",
           "dd", "table", "csv")
_ALIASES = {"json": "cardbench", "native": "cardbench", "classic": "table", "txt": "table", "fio-json": "fio",
            "terse": "fio-terse", "minimal": "fio-terse", "normal": "fio-normal", "fio-text": "fio-normal", "kdm": "kdiskmark", "cdm": "crystaldiskmark",
            "f3read": "f3", "f3write": "f3"}

__all__ = ["import_file", "import_text", "ImportReport", "Flag", "Skipped", "DEFAULT_FILE_SIZE",
           "DEFAULT_FILE_SIZE_TEXT", "FORMATS", "detect_format"]


def detect_format(text: str, *, path: str | None = None) -> str:
    """The format of ``text`` by its content (see the module docstring); UsageError listing the
    formats tried when it is none of them."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as e:
            if '"fio version"' in text[:4096]:
                return "fio"            # fio's JSON with a note after it; a truncation is named there
            where = f"{path}: " if path else ""
            cut = " (cut short?)" if "Expecting" in str(e) or "Unterminated" in str(e) else ""
            raise UsageError(f"{where}looks like JSON but cannot be parsed{cut}: {e}; nothing imported") from None
        return _json_kind(doc)
    if '"fio version"' in text and "{" in text:
        return "fio"                        # fio's JSON with notes printed around it
    for fmt, sniff in _sniffers():
        if sniff(text):
            return fmt
    if has_average_column(text):
        return "table"
    first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    if max(first.count(","), first.count(";"), first.count("\t")) >= 2:
        return "csv"
    raise UsageError("not a format cardbench imports; tried " + ", ".join(_DESCRIBED) +
                     " (--format forces one)")


_DESCRIBED = ("cardbench JSON", "fio JSON", "fio terse", "fio normal output", "KDiskMark text", "CrystalDiskMark text",
              "f3write/f3read", "f3probe", "H2testw log", "hdparm -t/-T", "dd", "classic table (an "
              "'average' column)", "CSV")


def _sniffers():
    return [("fio-terse", lambda t: any(fio.TERSE_RE.match(ln) for ln in t.splitlines()[:50])),
            ("fio-normal", fio_normal.is_fio_normal),
            ("kdiskmark", diskmark.is_kdiskmark), ("crystaldiskmark", diskmark.is_crystaldiskmark),
            ("f3probe", f3.is_f3probe), ("f3", f3.is_f3), ("h2testw", f3.is_h2testw),
            ("hdparm", hdparm_dd.is_hdparm), ("dd", hdparm_dd.is_dd)]


def _json_kind(doc) -> str:
    if isinstance(doc, dict) and str(doc.get("schema", "")).startswith(
            ("cardbench.result", "cardbench.export/", *(k.family for k in kinds.kinds()))):
        return "cardbench"
    if isinstance(doc, list) and doc and all(isinstance(d, dict) and d.get("schema") == RESULT_SCHEMA for d in doc):
        return "cardbench"
    if isinstance(doc, dict) and ("fio version" in doc or isinstance(doc.get("jobs"), list)):
        return "fio"
    schema = doc.get("schema") if isinstance(doc, dict) else None
    raise UsageError("JSON that is neither a cardbench export (schema cardbench.export/2) nor fio "
                     "--output-format=json output" + (f" (schema {schema!r})" if schema else ""))


def import_cardbench(doc, *, path: str) -> ImportReport:
    """An export (:func:`cardbench.store.export.read_export`): results in ``report.results``,
    verify documents in ``report.verify_docs``, probes and sessions in ``report.documents``."""
    contents = read_export(doc, path=path)
    report = ImportReport(path=path, format="cardbench", results=contents.results, verify_docs=contents.verify,
                          documents=[it for it in contents.items() if isinstance(it, dict)
                                     and it.get("schema") != kinds.VERIFY_SCHEMA])
    report.export = contents
    return report


def import_text(text: str, *, path: str = "<text>", fmt: str | None = None, file_size: int | str | None = None,
                reader: str | None = None, card: Card | None = None) -> ImportReport:
    """Like import_file, on text already read."""
    try:
        return _import_text(text, path=path, fmt=fmt, file_size=file_size, reader=reader, card=card)
    except UnitError as e:
        # a figure that is not the number its field needs (units.parse_number, the one reading of
        # every number an importer reads): its line or key and field, what was expected
        raise UsageError(f"{path}: {e}; nothing imported") from None
    except UsageError as e:
        if str(e).startswith(f"{path}:"):
            raise
        raise UsageError(f"{path}: {e}") from None          # every refusal names its file


def _import_text(text: str, *, path: str, fmt: str | None, file_size: int | str | None, reader: str | None,
                 card: Card | None) -> ImportReport:
    forced = bool(fmt)
    fmt = _ALIASES.get(fmt, fmt) if fmt else detect_format(text, path=path)
    if fmt not in FORMATS:
        raise UsageError(f"unknown import format {fmt!r} (use one of {', '.join(FORMATS)})")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if fmt in ("cardbench", "fio"):
        try:
            doc = json.loads(text) if fmt == "cardbench" else load_fio_json(text)
        except (ValueError, RecursionError) as e:       # RecursionError: nested deeper than Python goes
            if fmt == "fio" and not forced and is_fio_normal(text):
                # --output-format=normal,json with a progress line inside the JSON: the normal
                # output printed beside it carries the same run
                report = import_fio_normal(text, path=path, digest=digest, card=card, reader=reader)
                report.notes.append(f"the fio JSON in this file is not valid ({e}); read the normal output "
                                    "printed with it")
                return report
            raise UsageError(f"{path}: not valid JSON: {e}; nothing imported") from None
        if fmt == "cardbench":          # read_export checks its numbers
            if not isinstance(doc, (dict, list)):
                raise UsageError(f"{path}: not a cardbench export")
            return import_cardbench(doc, path=path)
        check_json_numbers(doc)         # NaN, Infinity, a count beyond 64 bits: refused, by key
        try:
            return import_fio(doc, path=path, digest=digest, card=card, reader=reader)
        except UnitError:
            raise                       # named in one line by import_text
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            # a field of the wrong type or shape: bad input in one line, not an internal error
            raise UsageError(f"{path}: fio JSON that cardbench cannot read ({type(e).__name__}: {e})") from None
    if fmt in ("table", "csv"):
        survey = import_table if fmt == "table" else import_csv
        report = survey(text, path=path, digest=digest, file_size=file_size, reader=reader)
        if card is not None:
            report.notes.append("--card applies to single-card formats; survey rows name their cards")
        return report
    if file_size is not None:
        raise UsageError(f"--file-size applies to surveys (table, csv), not to {fmt}")
    readers = {"fio-terse": import_terse, "fio-normal": import_fio_normal, "kdiskmark": diskmark.import_kdiskmark,
               "crystaldiskmark": diskmark.import_crystaldiskmark, "f3": f3.import_f3, "f3probe": f3.import_f3probe,
               "h2testw": f3.import_h2testw, "hdparm": hdparm_dd.import_hdparm, "dd": hdparm_dd.import_dd}
    return readers[fmt](text, path=path, digest=digest, card=card, reader=reader)


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
        # latin-1 decodes any bytes; a NUL byte is what shows a file that is not text
        if b"\x00" in data:
            raise UsageError(f"{p} is not a text file (CSV, table or JSON)") from None
        text = data.decode("latin-1")
    if not text.strip():
        raise UsageError(f"{p} is empty")
    return import_text(text, path=str(p), fmt=fmt, file_size=file_size, reader=reader, card=card)
