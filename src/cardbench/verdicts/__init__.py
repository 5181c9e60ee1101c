"""Verdicts: what a result means against a label, the path's ceiling and other results.

* :mod:`~cardbench.verdicts.labels`: ``parse_label(text) -> list[Claim]``, ``claims_from_ssr(fields)``,
  ``label_register_mismatches(label_claims, fields)``, ``label_identify_mismatches(label_claims, ata)``
  (a "UDMA n" label against the modes a CF card announces in its IDENTIFY data);
* :mod:`~cardbench.verdicts.claims`: ``judge(result, claims, ceilings=None) -> list[dict]``;
* :mod:`~cardbench.verdicts.ceiling`: ``path_ceiling(reader) -> Ceiling | None``,
  ``interface_mode_ceiling(card.ata)`` (a CF card's transfer mode),
  ``mark_limits(result, ceiling)``, ``plausibility(result)``;
* :mod:`~cardbench.verdicts.identity`: ``identity_check(card, target)`` (the maker an SD card's
  CID or a CF card's ATA model names, against ``--brand``);
* :mod:`~cardbench.verdicts.readers`: ``reader_ceilings(results) -> list[dict]``,
  ``rejudge_reader(store, reader_identity) -> list[Result]`` (stored results of a reader judged
  again with the ceiling its cards show; called after every saved run).

Figures come from the packaged ``data/ratings.toml`` (:mod:`~cardbench.verdicts.ratings`).
:func:`check_result` runs the checks a finished run gets.
"""

from __future__ import annotations

from typing import Any, Mapping

from cardbench.errors import UsageError
from cardbench.result import Result
from cardbench.verdicts.ceiling import (Ceiling, ceilings_for, clear_limits, interface_mode_ceiling, mark_limits,
                                       path_ceiling, plausibility)
from cardbench.verdicts.claims import INDICATIVE_NOTE, judge
from cardbench.verdicts.labels import (Check, Claim, claims_from_ssr, label_identify_mismatches,
                                      label_register_mismatches, parse_label)
from cardbench.verdicts.readers import reader_ceilings, rejudge_reader, rejudge_result

__all__ = ["Ceiling", "Check", "Claim", "INDICATIVE_NOTE", "ceilings_for", "check_result", "claims_from_ssr",
           "clear_limits", "interface_mode_ceiling", "judge", "label_identify_mismatches",
           "label_register_mismatches", "mark_limits", "parse_label", "path_ceiling", "plausibility", "reader_ceilings", "rejudge_reader", "rejudge_result"]


def check_result(result: Result, *, ssr: Mapping[str, Any] | None = None,
                 observed: list[Mapping[str, Any]] | None = None) -> None:
    """The checks a finished run gets, in place: plausibility warnings, ceiling marks
    (``limited_by``), and, when the card has a label, its claims judged into ``result.claims``.

    ``ssr``: the decoded SD Status classes (see :func:`claims_from_ssr`), judged too (origin
    "register") and compared with the label; ``observed``: reader_ceilings() over stored results.
    A label that cannot be parsed becomes a result warning here (the CLI rejects it up front).
    Calling it again adds no warning twice (to re-mark against changed ceilings, clear the old
    marks first: :func:`clear_limits`, as :func:`rejudge_result` does).
    """
    plausibility(result)
    ceilings = ceilings_for(result, observed)
    mark_limits(result, ceilings)
    claims: list[Claim] = []
    if result.card.label:
        try:
            claims = parse_label(result.card.label)
        except UsageError as exc:
            if f"label not judged: {exc.message}" not in result.warnings:   # judged again: once
                result.warnings.append(f"label not judged: {exc.message}")
    register = claims_from_ssr(dict(ssr)) if ssr else []
    if claims or register:
        result.claims = judge(result, claims + register, ceilings)
    findings = label_register_mismatches(claims, dict(ssr)) if ssr and claims else []
    findings += label_identify_mismatches(claims, result.card.ata)
    from cardbench.verdicts.identity import apply_identity_check
    apply_identity_check(result)      # the card's own register against its --brand
    for finding in findings:
        if finding not in result.warnings:
            result.warnings.append(finding)
