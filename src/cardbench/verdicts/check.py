"""The checks a finished run gets: :func:`check_result` (plausibility, ceiling marks, label and
register claims, the card's identity against its brand)."""

from __future__ import annotations

from typing import Any, Mapping

from cardbench.errors import UsageError
from cardbench.result import Result
from cardbench.verdicts.ceiling import ceilings_for, mark_limits, plausibility
from cardbench.verdicts.claims import judge
from cardbench.verdicts.identity import apply_identity_check
from cardbench.verdicts.labels import (
    Claim,
    claims_from_ssr,
    label_identify_mismatches,
    label_register_mismatches,
    parse_label,
)


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
    apply_identity_check(result)      # the card's own register against its --brand
    for finding in findings:
        if finding not in result.warnings:
            result.warnings.append(finding)
