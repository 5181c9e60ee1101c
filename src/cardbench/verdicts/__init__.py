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
:func:`check_result` (:mod:`~cardbench.verdicts.check`) runs the checks a finished run gets.
"""

from __future__ import annotations

from cardbench.verdicts.ceiling import (
                                       Ceiling,
                                       ceilings_for,
                                       clear_limits,
                                       interface_mode_ceiling,
                                       mark_limits,
                                       path_ceiling,
                                       plausibility,
)
from cardbench.verdicts.check import check_result
from cardbench.verdicts.claims import INDICATIVE_NOTE, judge
from cardbench.verdicts.labels import (
                                       Check,
                                       Claim,
                                       claims_from_ssr,
                                       label_identify_mismatches,
                                       label_register_mismatches,
                                       parse_label,
)
from cardbench.verdicts.readers import reader_ceilings, rejudge_reader, rejudge_result

__all__ = ["Ceiling", "Check", "Claim", "INDICATIVE_NOTE", "ceilings_for", "check_result", "claims_from_ssr",
           "clear_limits", "interface_mode_ceiling", "judge", "label_identify_mismatches",
           "label_register_mismatches", "mark_limits", "parse_label", "path_ceiling", "plausibility", "reader_ceilings", "rejudge_reader", "rejudge_result"]
