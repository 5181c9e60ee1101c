"""What every importer returns, and how a row of a hand-made survey becomes a Result."""

from __future__ import annotations

import datetime as _dt
import textwrap
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from cardbench import __version__
from cardbench.errors import UsageError
from cardbench.importers.checks import Flag, Printed, check_row
from cardbench.kinds.verify import summary as verify_line  # one line for a verify document
from cardbench.result import Card, Reader, Result, Run, TestResult, beyond_store
from cardbench.store.export import counts
from cardbench.units import MB, RATE_UNITS, UnitError, parse_size
from cardbench.verify.doc import new_doc

#: The file size a survey's write times refer to when neither the option nor the file says:
#: 42 MB = 42,000,000 B, the file of the classic hand-made table (its X figures, MB/s / 0.15,
#: show decimal megabytes). Give --file-size 42MiB if your survey used 44,040,192 B.
DEFAULT_FILE_SIZE = 42 * MB
DEFAULT_FILE_SIZE_TEXT = "42MB"

#: uuid5 namespace of imported results: the same row of the same file imports under the same id,
#: so importing a file again replaces its results instead of doubling them.
IMPORT_NAMESPACE = uuid.UUID("6c1f4b8e-2f55-4a7e-9d1e-63617264626e")


@dataclass
class Skipped:
    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: skipped ({self.reason}): {self.text[:80]}"


@dataclass
class ImportReport:
    """The results read from one file, plus everything a person should know about the reading."""

    path: str
    format: str                     # one of cardbench.importers.FORMATS
    results: list[Result] = field(default_factory=list)
    #: cardbench.verify/1 documents (f3, H2testw): verdicts, not speeds
    verify_docs: list[dict] = field(default_factory=list)
    #: one line: which unit convention was applied, and why (what in the file showed it)
    convention: str | None = None
    flags: list[Flag] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    file_size_bytes: int | None = None
    file_size_source: str | None = None     # "option" | "file" | "default" | "column"
    #: figures consistent with only one route of the author's arithmetic (importers.checks): notes, not errors
    audit_notes: list[Flag] = field(default_factory=list)
    #: the rule the audit followed, in words (None: each figure against its raw data)
    audit_rule: str | None = None
    #: a cardbench export's documents of the other kinds (cardbench.probe/1, cardbench.session/1, ...)
    documents: list[dict] = field(default_factory=list)
    #: a cardbench export, read whole (cardbench.store.export.Contents): stored in one transaction
    export: Any = None

    def lines(self) -> list[str]:
        """A human summary: what was read, every flag and every skipped line."""
        what = f"{len(self.results)} result{'s' if len(self.results) != 1 else ''}"
        if self.verify_docs:
            n = len(self.verify_docs)
            what = f"{n} verify verdict{'s' if n != 1 else ''}" + (f" and {what}" if self.results else "")
        if self.export is not None:
            what = counts(self.export.sections())
        out = [f"{self.path}: {what} read as {self.format}"]
        if self.file_size_bytes is not None:
            out[0] += f"; write times taken as seconds to write {self.file_size_bytes:,} B ({self.file_size_source})"
        said = ([f"units: {self.convention}"] if self.convention else []) + \
            [verify_line(d) for d in self.verify_docs] + [f"note: {n}" for n in self.notes]

        def wrap(text: str) -> str:
            return textwrap.fill(text, width=80, initial_indent="  ", subsequent_indent="    ",
                                 break_on_hyphens=False)

        if self.format != "cardbench":
            # the errors lead, largest first, each with its size in percent; then the rule, then notes
            errors = sorted(self.flags, key=lambda f: -abs(f.percent or 0.0))
            n = len(errors)
            out.append(f"{n} figure{'s' if n != 1 else ''} disagree{'s' if n == 1 else ''} with the row's own raw "
                       "data beyond rounding" + (" (errors):" if errors else ""))
            out += [wrap(f"ERROR {f}" if self.audit_rule else str(f)) for f in errors]
        out += [textwrap.fill(line, width=80, subsequent_indent="  ", break_on_hyphens=False) for line in said]
        if self.audit_rule:
            out.append(textwrap.fill(f"audit: {self.audit_rule}", width=80, subsequent_indent="  ",
                                     break_on_hyphens=False))
        out += [wrap(str(x)) for x in [*self.audit_notes, *self.skipped]]
        return out

    def flagged_lines(self) -> list[int]:
        return sorted({f.line for f in self.flags})

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "results": [r.id for r in self.results],
                "verify": [d["id"] for d in self.verify_docs], "convention": self.convention,
                "flags": [f.to_dict() for f in self.flags], "audit_notes": [f.to_dict() for f in self.audit_notes],
                "audit_rule": self.audit_rule,
                "skipped": [s.__dict__ for s in self.skipped], "notes": list(self.notes),
                "file_size_bytes": self.file_size_bytes, "file_size_source": self.file_size_source}

    def save_to(self, store) -> list[str]:
        """Save what was read into an open store (a cardbench export: all of it in one transaction)."""
        if self.export is not None:
            return store.save_all(self.export.items())
        return [store.save_record(it) for it in [*self.results, *self.verify_docs]]


def resolve_file_size(option: int | str | None, from_file: str | None) -> tuple[int, str]:
    """(bytes, where it came from): the option, else the file's directive, else the default."""
    try:
        if option is not None:
            return parse_size(option), "option"
        if from_file:
            return parse_size(from_file), "file"
    except UnitError as e:
        raise UsageError(f"bad file size: {e}") from None
    return DEFAULT_FILE_SIZE, "default"


def import_id(digest: str, fmt: str, key: str) -> str:
    return uuid.uuid5(IMPORT_NAMESPACE, f"{digest}:{fmt}:{key}").hex


def imported_at() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def parse_capacity(text: str | None) -> int | None:
    if not text or text.strip() in ("-", "?", ""):
        return None
    try:
        return parse_size(text.strip().replace(",", "."))
    except UnitError:
        return None


def none_if_blank(text: str | None) -> str | None:
    if text is None:
        return None
    t = text.strip()
    return None if t in ("", "-", "?", "n/a", "N/A", "none") else t


@dataclass
class SurveyRow:
    """One card of a hand-made survey (classic table or legacy CSV), figures as printed."""

    line: int
    brand: str | None
    capacity_text: str | None
    label: str | None
    times: list[Printed]
    file_bytes: int
    file_size_source: str
    avg: Printed | None = None
    write_rate: Printed | None = None
    write_x: Printed | None = None
    read_rate: Printed | None = None
    read_x: Printed | None = None
    read_times: list[Printed] = field(default_factory=list)
    name: str | None = None
    reader: str | None = None
    date: str | None = None
    rate_unit: str = "MB/s"
    rate_from: str = "mean_time"
    raw: str = ""

    @property
    def title(self) -> str:
        return " ".join(p for p in (self.brand, self.name, self.capacity_text, self.label) if p) or f"row {self.line}"

    def flags(self) -> list[Flag]:
        return self.audit()[0]

    def audit(self) -> tuple[list[Flag], list[Flag]]:
        """(errors, notes) of this row, by the author's arithmetic (importers.checks.check_row)."""
        notes: list[Flag] = []
        errors = check_row(line=self.line, row=self.title, times=self.times, file_bytes=self.file_bytes, avg=self.avg,
                           write_rate=self.write_rate, write_x=self.write_x, read_rate=self.read_rate,
                           read_x=self.read_x, rate_unit_bytes=RATE_UNITS[self.rate_unit], rate_unit=self.rate_unit,
                           rate_from=self.rate_from, notes=notes, read_times=self.read_times)
        return errors, notes

    def to_result(self, *, path: str, fmt: str, digest: str, reader: str | None = None,
                  flags: Sequence[Flag] = ()) -> Result:
        unit_b = RATE_UNITS[self.rate_unit]
        printed = {k: getattr(self, k).text for k in ("avg", "write_rate", "write_x", "read_rate", "read_x")
                   if getattr(self, k) is not None}
        common = {"source": f"imported {fmt}", "file_bytes": self.file_bytes, "file_size_source": self.file_size_source,
                  "import_line": self.line}
        tests: list[TestResult] = []
        if self.times:
            tests.append(TestResult("seq_write", dict(common, timing="printed write times (s)"),
                                    runs=[Run(self.file_bytes, t.value) for t in self.times],
                                    extra={"raw": self.raw, "printed": {"times_s": [t.text for t in self.times], **printed}}))
        elif self.write_rate is not None and self.write_rate.value > 0:
            rate = self.write_rate.value * unit_b
            tests.append(TestResult("seq_write", dict(common, timing="derived from the printed rate"),
                                    runs=[Run(self.file_bytes, self.file_bytes / rate)],
                                    extra={"raw": self.raw, "printed": printed}))
        if self.read_times:
            tests.append(TestResult("cold_read", dict(common, timing="printed read times (s)"),
                                    runs=[Run(self.file_bytes, t.value) for t in self.read_times],
                                    extra={"raw": self.raw, "printed": {"times_s": [t.text for t in self.read_times], **printed}}))
        elif self.read_rate is not None and self.read_rate.value > 0:
            rate = self.read_rate.value * unit_b
            tests.append(TestResult("cold_read", dict(common, timing="derived from the printed rate"),
                                    runs=[Run(self.file_bytes, self.file_bytes / rate)],
                                    extra={"raw": self.raw, "printed": printed}))
        r = Result(target={"kind": "import", "path": path, "format": fmt, "line": self.line,
                           "file_bytes": self.file_bytes, "file_size_source": self.file_size_source,
                           "imported_at": imported_at()},
                   card=Card(brand=self.brand, name=self.name, capacity_bytes=parse_capacity(self.capacity_text),
                             label=self.label),
                   reader=Reader(name=self.reader or reader), tests=tests,
                   warnings=[f"imported figures disagree with their own raw data: {f}" for f in flags],
                   id=import_id(digest, fmt, str(self.line)), host={},
                   tool={"name": "cardbench", "version": __version__, "importer": fmt}, source="import")
        if self.date:
            r.started_at = self.date
        r.finished_at = None
        return r


# --- shared by the peer-tool importers (fio, KDiskMark, CrystalDiskMark, f3, H2testw, hdparm, dd) ---

def bad_input(path: str, where: str, what: str) -> UsageError:
    """The one line for a truncated or mangled export: the file, the line or key, what is wrong."""
    return UsageError(f"{path}: {where}: {what}; nothing imported")


def imported_result(*, path: str, fmt: str, digest: str, key: str, tests: list[TestResult],
                    card: Card | None = None, reader: str | None = None, started: str | None = None,
                    tool: dict | None = None, target: dict | None = None,
                    warnings: list[str] | None = None) -> Result:
    """A Result of an import: id from the file's content (idempotent), target kind "import"."""
    tgt = {"kind": "import", "path": path, "format": fmt, "imported_at": imported_at()}
    tgt.update(target or {})
    r = Result(target=tgt, card=card or Card(), reader=Reader(name=reader), tests=tests,
               warnings=list(warnings or []), id=import_id(digest, fmt, key), host={},
               tool={"name": "cardbench", "version": __version__, "importer": fmt, **(tool or {})},
               source=f"import-{fmt}")
    r.started_at = started or r.started_at
    r.finished_at = None
    too_large = beyond_store(r)
    if too_large:
        raise bad_input(path, key, too_large)
    return r


def imported_verify(*, path: str, fmt: str, digest: str, key: str, mode: str, tool: str,
                    tool_version: str | None, verdict: str | None, announced: int | None, usable: int | None,
                    kind: str | None, basis: str, card: Card | None = None, reader: str | None = None,
                    device: str | None = None, fix_command: str | None = None, raw: str = "",
                    **fields: Any) -> dict:
    """A ``cardbench.verify/1`` document read from another tool's log (cardbench.verify.doc)."""

    d = new_doc(mode)
    if card is None or not (card.name or card.brand or card.label):
        # a log that does not name its card is named by its device, else by its file
        card = Card(name=device or PurePath(path).stem)
    d.update({"id": import_id(digest, fmt, key), "verdict": verdict, "announced_bytes": announced,
              "usable_bytes": usable, "usable_basis": basis, "kind": kind, "device": device,
              "complete": True, "host": {}, "source": f"import-{fmt}",
              "card": (card or Card()).to_dict() if (card and (card.name or card.brand or card.label)) else None,
              "reader": Reader(name=reader).to_dict() if reader else None,
              "tool": {"name": tool, "version": tool_version, "importer": f"cardbench {__version__}"},
              "target": {"kind": "import", "path": path, "format": fmt, "imported_at": imported_at()},
              "raw": raw})
    d["started_at"] = None
    if fix_command:
        d["fix_command"] = fix_command
        d["fix"] = {"tool": fix_command.split()[0], "command": fix_command, "note": f"as {tool} printed it"}
    d["method"] = {"tool": tool, "algorithm": fields.pop("algorithm", None)}
    d.update(fields)
    return d
