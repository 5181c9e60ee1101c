"""``cardbench readers``: each reader seen in the store, with the ceiling its cards suggest.

A thin layer over :func:`cardbench.verdicts.readers.reader_ceilings` on ``open_store(db).results()``;
registered on the main group as ``readers``. ``--format json`` prints the list of reader entries
exactly as reader_ceilings returns them (bytes/s figures, findings per direction). ``--rejudge``
first runs :func:`cardbench.verdicts.readers.rejudge_reader` for every reader in the store.
"""

from __future__ import annotations

import click

from cardbench.cli import params
from cardbench.cli.ui import said
from cardbench.devices.identity import shared_path
from cardbench.errors import UsageError
from cardbench.evidence import probe_document, probe_findings
from cardbench.measured import keep_measured
from cardbench.record import check_store
from cardbench.report.readers import FORMATS, render_probe, render_readers
from cardbench.verdicts.readers import judge_shared, reader_ceilings, rejudge_reader
from cardbench.workloads.shared import open_devices, read_together


@click.command("readers", epilog=params.examples(
    "cardbench readers",
    "cardbench readers --rejudge   # mark older runs at a ceiling found since",
    "cardbench readers --probe /dev/sdb /dev/sdc   # two cards read at once"))
@params.db_option
@params.output_options(FORMATS)
@click.option("--rejudge", is_flag=True,
              help="First judge the stored results of each named reader again with the ceiling its cards show "
                   "and save them (`cardbench run` does this after every run; this catches up older stores).")
@click.option("--probe", "probe", is_flag=True,
              help="Read the DEVICES (cards in the slots of one reader, or behind one hub) alone and then at "
                   "once, read-only: does the path they share carry their sum?")
@click.option("--seconds", type=click.FloatRange(0.2, 60), default=2.0, show_default=True,
              help="With --probe: seconds each card is read alone.")
@click.option("--reader", "reader_name", metavar="NAME", help="With --probe: the name of the reader the cards share.")
@click.option("--no-save", is_flag=True, help="With --probe: do not store the probe (it is stored by default, as "
                                              "evidence every later `cardbench readers` weighs).")
@click.argument("devices", nargs=-1)
def readers(db: str | None, out, rejudge: bool, probe: bool, seconds: float, reader_name: str | None, no_save: bool,
            devices: tuple[str, ...]) -> None:
    """List each card reader in the store with its observed ceiling and the evidence, piece by
    piece, each with its confidence.

    A "likely" ceiling marks the stored results of that reader that sit at it as limited by the
    reader (their label claims above it inconclusive): after each `cardbench run`, or here with
    --rejudge. With --probe DEVICE DEVICE...: read those cards at once (read-only) and say
    whether the reader or hub they share is the ceiling.
    """

    if probe or devices:
        if not probe:
            raise UsageError("devices are read only with --probe (cardbench readers --probe DEVICE DEVICE...)")
        if not no_save:
            check_store(db)          # a bad --db is refused before the cards are read
        findings: list[dict] = []

        def measure() -> dict:
            finding = judge_shared(read_together(open_devices(list(devices)), seconds=seconds))
            doc = _probe_document(finding, list(devices), reader_name)
            finding["probe_id"] = doc["id"]
            findings.append(finding)
            return doc

        def show(doc: dict) -> None:
            out.echo(render_probe(findings[0], "json" if out.json else "table", width=out.width), nl=False)
        kept = keep_measured(measure, db=db, save=not no_save, show=show)
        if kept.recorded is not None:
            said(kept.recorded, saved_line=False)
            out.note(f"probe stored in {kept.recorded.location} (id {kept.item['id'][:8]}): `cardbench readers` "
                     "weighs it")
        return
    with params.open_to_read(db) as store:
        if rejudge:
            changed = 0
            for identity in dict.fromkeys(r.reader.identity() for r in store.results()):
                changed += len(rejudge_reader(store, identity))
            out.note(f"{changed} stored result(s) judged again and saved", with_json=True)
        results = store.results()
        probes = probe_findings(store.probes())
        sessions = store.sessions()
    out.echo(render_readers(reader_ceilings(results, probes=probes), out.fmt, width=out.width, sessions=sessions),
             nl=False)


def _probe_document(finding: dict, devices: list[str], reader_name: str | None) -> dict:
    """The probe as a ``cardbench.probe/1`` document: what the devices share (one reader's slots,
    or the USB hub the sticks are behind: cardbench.devices.identity.shared_path) and each card
    as the devices tell them (their identity, as `run` and the drawer name them)."""
    reader, cards = shared_path(devices, reader_name)
    finding["reader_identity"] = reader.identity()
    finding["reader"] = reader.name or reader.identity()
    return probe_document(finding, reader=reader, cards=cards)
