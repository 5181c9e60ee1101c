"""Which readers hold cards back, from every piece of evidence about each reader.

Direct evidence (:func:`same_card_findings`: the same card faster through another reader;
:func:`judge_shared`: cards read at once that do not add up), inferred evidence (the clustering
below: many different cards at one rate) and the link's own limit (:func:`link_finding`, an
upper bound) are weighed by :func:`reader_ceilings`; the strongest names the ceiling.

The clustering: a ceiling inferred from many cards hitting the same wall.

A reader (or its USB link) that limits reads shows as several *different* cards reading at the
same top rate while their writes, which the reader does not limit, differ widely. The reference
notes found exactly that in published tables that never flagged it (every card on a Pi 4 reading
40.8-44.4 MB/s; standards peers notes, "Gaps" 1).

For each reader (``result.reader.identity()``) and each card behind it (``card.identity()``),
the card's figure in a direction is its best median over stored results: reads from
``cold_read``/``raw_read``, writes from ``seq_write``/``raw_write``/``sustained_write``
(incomplete tests and page-cache figures above 20 GB/s are left out). Then, per direction:

* cluster: the largest set of cards whose figures lie within ``tolerance`` (3%) of each other
  (max/min <= 1.03); ties go to the faster set. 3% is the brief's "within ~3%": it covers run-to-run
  noise and figures printed to two digits (3.7 may be 3.75). Cards just outside it (within twice
  the tolerance below) are named in the evidence but not counted;
* ``none`` (no ceiling named): fewer than ``min_cards`` (3) cards measured, or no cluster of 3,
  or at least as many cards faster than the cluster as in it;
* ``likely``: a cluster of >= 3 cards, no card faster than it through this reader, and the
  cluster's figures in the other direction differ widely (max/min >= ``spread``, 1.3): the
  cards are different, the rate is the reader's;
* ``possible``: a cluster of >= 3 cards, but some (fewer) cards are faster through the same reader
  (a plateau, e.g. a transfer mode those cards share, not a hard limit of the reader), or the other
  direction is unknown or alike (the cards may simply be alike).

The ceiling named is the cluster's median.

CompactFlash cards that answered ATA IDENTIFY add evidence of another kind: the transfer mode the
reader talks to them (:func:`card_modes`). When every card at the ceiling sits at >= 90% of its
mode's rate (three cards at 16 MB/s, all in PIO 4), the finding says the mode explains it
(``explained_by``: a PIO-only CF side, not the USB link); when their modes allow much more, it says
the mode does not explain it. ``interface_modes`` lists the modes of the cards at the ceiling.

What a "likely" ceiling does to results (:func:`rejudge_reader`): after a run through a reader is
stored, every stored result of that reader is judged again with ``reader_ceilings`` over them as
``observed`` (:func:`cardbench.verdicts.check_result`). A figure at >= 90% of the observed
ceiling is marked ``limited_by`` ("limited by the reader ...; the card may be faster") and a
claim above the ceiling becomes ``inconclusive``; marks from an earlier, different ceiling are
removed first, so a ceiling that later turns out to be a plateau (a faster card came along)
unmarks the cards again. Only cardbench's own measurements (source "run" or "demo", complete)
are re-judged; imported results count as evidence but are left as imported. Results of an
unnamed reader ("name:unknown": many readers may hide behind it) are not re-judged.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from typing import Any, Mapping

from cardbench.result import Card, Reader, Result
from cardbench.units import MB
from cardbench.verdicts.ceiling import (
    clear_limits,
    memory_speed,
    mode_rate,
    near_fraction,
    path_ceiling,
)
from cardbench.verdicts.check import check_result
from cardbench.verdicts.labels import READ_TESTS
from cardbench.verdicts.labels import WRITE_TESTS as LABEL_WRITE_TESTS

#: the tests a reader's ceiling is read from: those the label claims are judged on, and the
#: sustained write (its slow level is as bounded by the reader as a sequential write)
WRITE_TESTS = LABEL_WRITE_TESTS + ("sustained_write",)
TOLERANCE = 0.03
MIN_CARDS = 3
SPREAD = 1.3
_RANK = {"likely": 2, "possible": 1, "none": 0}
#: the results :func:`rejudge_reader` judges again: cardbench's own measurements
REJUDGED_SOURCES = ("run", "demo")


def _mbs(value: float) -> str:
    return f"{value / MB:.3g} MB/s"


def card_name(card: Card) -> str:
    """A short name for a card in evidence text."""
    name = " ".join(p for p in (card.brand, card.name) if p)
    return name or card.model or card.label or card.identity()


#: the results whose card name a person typed: ``cardbench run --name`` and the drawer's name prompt
#: (cardbench's own measurements). An importer's name comes from a file or a device path, the
#: demo's from the program: no one vouched for those.
NAMED_SOURCES = ("run",)


def same_card_basis(result: Result) -> str | None:
    """What makes this record's card "the same card" as another record of its identity, for the
    reader verdicts: "own" (its own identity: CID, ATA serial, a stick's or a disk's serial,
    :meth:`cardbench.result.Card.own_identity`), "named" (a name the person typed, ``--name`` or
    the drawer's prompt: the person vouches that it is one card), or None (a size, a brand, a name
    from an imported file: two cards can share it)."""
    card = result.card
    if card.own_identity():
        return "own"
    if (card.name or "").strip() and result.source in NAMED_SOURCES and card.identity().startswith("user:"):
        return "named"
    return None


def as_named(name: str) -> str:
    """A card that is one card on the person's word, as every verdict names it."""
    return f"{name}, as you named it"


def _best_figures(results: list[Result]) -> tuple["OrderedDict[str, str]", dict[str, dict[str, float]],
                                                   dict[str, str]]:
    """Card names and best medians per direction: ({card_id: name}, {"read": {card_id: bps}, ...},
    {card_id: "own" | "named"}), the last for the cards that can be "the same card" across
    readers (:func:`same_card_basis`)."""
    names: OrderedDict[str, str] = OrderedDict()
    best: dict[str, dict[str, float]] = {"read": {}, "write": {}}
    memory = memory_speed()
    same: dict[str, str] = {}
    for result in results:
        cid = result.card.identity()
        basis = same_card_basis(result)
        if basis is not None and same.get(cid) != "own":
            same[cid] = basis
        for direction, tests in (("read", READ_TESTS), ("write", WRITE_TESTS)):
            for test in result.tests:
                if test.name not in tests or not test.complete:
                    continue
                median = test.median_bytes_per_s
                if median is None or median <= 0 or median > memory:
                    continue
                names.setdefault(cid, card_name(result.card))
                if median > best[direction].get(cid, 0.0):
                    best[direction][cid] = median
    return names, best, same


def _cluster(values: dict[str, float], tolerance: float) -> list[str]:
    """The largest set of keys whose values are within ``tolerance`` of each other (max/min);
    ties go to the faster set."""
    items = sorted(values.items(), key=lambda kv: kv[1])
    best: list[str] = []
    best_top = -1.0
    j = 0
    for i in range(len(items)):
        # window [j, i]: the largest window ending at i
        while items[i][1] > items[j][1] * (1 + tolerance) + 1e-9 * items[j][1]:
            j += 1
        window = [k for k, _ in items[j:i + 1]]
        top = items[i][1]
        if len(window) > len(best) or (len(window) == len(best) and top > best_top):
            best, best_top = window, top
    return best


def _count(n: int) -> str:
    return f"{n} card" if n == 1 else f"{n} cards"


def _names(ids: list[str], names: Mapping[str, str], values: dict[str, float]) -> str:
    return ", ".join(f"{names[i]} {_mbs(values[i])}" for i in sorted(ids, key=lambda k: values[k]))


def card_modes(results: list[Result]) -> dict[str, dict[str, Any]]:
    """Per card identity, the transfer mode its IDENTIFY data says it uses through this reader
    (``{"name": "PIO 4", "rate": bytes/s or None, "selected": bool}``), for cards that answered."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        mode = (r.card.ata or {}).get("mode") or {}
        if mode.get("kind") is None or mode.get("number") is None:
            continue
        out[r.card.identity()] = {"name": f"{mode['kind']} {mode['number']}", "selected": bool(mode.get("selected")),
                                  "rate": mode_rate(mode["kind"], int(mode["number"]))}
    return out


def _mode_evidence(cluster: list[str], ceiling: float, modes: dict[str, dict[str, Any]], tolerance: float,
                   finding: dict[str, Any]) -> str | None:
    """What the cards' transfer modes say about a ceiling: whether the mode the reader talks to
    them explains it (at >= 90% of the mode's rate), or allows more."""
    known = {k: modes[k] for k in cluster if k in modes}
    if not known:
        return None
    names = sorted({m["name"] for m in known.values()})
    finding["interface_modes"] = names
    near = near_fraction()
    capped = [k for k, m in known.items() if m["rate"] and near * m["rate"] <= ceiling <= m["rate"] * (1 + tolerance)]
    said = f"{len(known)} of the {len(cluster)} cards at it" if len(known) < len(cluster) else "the cards at it"
    if capped and len(capped) == len(cluster):
        rates = sorted({_mbs(known[k]["rate"]) for k in capped})
        finding["explained_by"] = f"interface mode {', '.join(names)}"
        return (f"{said} talk {', '.join(names)} to the reader ({' / '.join(rates)} at most, from their IDENTIFY "
                "data): the transfer mode explains the ceiling")
    if capped:
        return (f"{len(capped)} of the {len(cluster)} cards at it are capped by their transfer mode "
                f"({', '.join(sorted({known[k]['name'] for k in capped}))})")
    if all(m["rate"] and ceiling < near * m["rate"] for m in known.values()):
        return (f"{said} talk {', '.join(names)} to the reader, which allows more: the transfer mode does not "
                "explain the ceiling")
    return f"{said} talk {', '.join(names)} to the reader"


def find_ceiling(values: dict[str, float], other: dict[str, float], names: dict[str, str], direction: str,
                 *, tolerance: float = TOLERANCE, min_cards: int = MIN_CARDS, spread: float = SPREAD,
                 modes: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One direction's finding for one reader (see the module docstring). ``modes``
    (:func:`card_modes`): the CF cards' transfer modes, evidence beside the figures."""
    other_dir = "write" if direction == "read" else "read"
    verb = {"read": "read", "write": "write"}[direction]
    finding: dict[str, Any] = {"direction": direction, "ceiling_bytes_per_s": None, "cards_measured": len(values),
                               "cards_at_ceiling": 0, "cards_above": 0, "confidence": "none", "members": [],
                               "cluster_min_bytes_per_s": None, "cluster_max_bytes_per_s": None,
                               "other_spread": None, "evidence": ""}
    if len(values) < min_cards:
        finding["evidence"] = (f"only {len(values)} card(s) with a {direction} figure through this reader; "
                               f"naming a ceiling needs at least {min_cards}")
        return finding
    cluster = _cluster(values, tolerance)
    lo, hi = min(values.values()), max(values.values())
    if len(cluster) < min_cards:
        finding["evidence"] = (f"no {min_cards} cards {verb} within {tolerance:.0%} of each other "
                               f"({len(values)} cards, {_mbs(lo)} to {_mbs(hi)}): the cards differ, so the reader is "
                               f"not what sets their {direction} rates")
        return finding
    c_vals = [values[k] for k in cluster]
    c_lo, c_hi = min(c_vals), max(c_vals)
    ceiling = statistics.median(c_vals)
    above = [k for k in values if k not in cluster and values[k] > c_hi]
    below_near = [k for k in values if k not in cluster and c_lo * (1 - 2 * tolerance) <= values[k] < c_lo]
    others = [other[k] for k in cluster if k in other]
    ratio = max(others) / min(others) if len(others) >= 2 and min(others) > 0 else None
    finding.update(cluster_min_bytes_per_s=c_lo, cluster_max_bytes_per_s=c_hi, cards_at_ceiling=len(cluster),
                   cards_above=len(above), members=[names[k] for k in cluster], other_spread=ratio)

    span = _mbs(c_lo) if _mbs(c_lo) == _mbs(c_hi) else f"{_mbs(c_lo)[:-5]}-{_mbs(c_hi)}"
    parts = [f"{len(cluster)} of {len(values)} cards {verb} at {span} (within {tolerance:.0%} of each other, "
             f"median {_mbs(ceiling)})"]
    if ratio is None:
        parts[0] += f", but their {other_dir} figures are unknown, so they may simply be alike cards"
    elif ratio >= spread:
        parts[0] += (f", while their {other_dir}s range {_mbs(min(others))} to {_mbs(max(others))} "
                     f"({ratio:.1f}x apart): different cards, one {direction} rate")
    else:
        parts[0] += (f", but their {other_dir}s are alike too ({_mbs(min(others))} to {_mbs(max(others))}, "
                     f"{ratio:.2f}x), so they may simply be alike cards")
    if above:
        parts.append(f"{_count(len(above))} {verb if len(above) > 1 else verb + 's'} faster through the same reader "
                     f"({_names(above, names, values)}), "
                     "so it is not a hard limit of the reader: perhaps a transfer mode these cards share")
    if below_near:
        parts.append(f"{_count(len(below_near))} just below, outside the {tolerance:.0%} window "
                     f"({_names(below_near, names, values)})")

    said = _mode_evidence(cluster, ceiling, modes or {}, tolerance, finding)
    if said:
        parts.append(said)
    if above and len(above) >= len(cluster):
        confidence = "none"
        parts.append("more cards are faster than the cluster than sit in it: no ceiling named")
    elif above or ratio is None or ratio < spread:
        confidence = "possible"
    else:
        confidence = "likely"
    finding["confidence"] = confidence
    if confidence != "none":
        finding["ceiling_bytes_per_s"] = ceiling
    finding["evidence"] = "; ".join(parts)
    return finding


#: the same card through two readers: the slower reader caps it when the other one carries it
#: this much faster (10%: well beyond run-to-run noise of a few percent)
SAME_CARD_GAP = 0.10
#: cards read at once: the shared path is the ceiling when together they do not beat the best
#: card alone by more than this, though alone they add up to SHARED_SUM times more
SHARED_NEAR = 0.10
SHARED_SUM = 1.3
#: each kind of evidence in words, as `cardbench readers` and the demo name it
EVIDENCE_KINDS = {"same_card": "the same card through another reader", "probe": "cards read at once",
                  "cluster": "many cards at one rate", "link": "the link's limit"}
#: which kind of evidence is shown first when two are equally strong: direct evidence first
_KIND_ORDER = {"same_card": 0, "probe": 1, "cluster": 2}


def same_card_findings(identity: str,
                       per_reader: Mapping[str, tuple[Mapping[str, str], dict[str, dict[str, float]], dict[str, str]]],
                       reader_names: dict[str, str], *, gap: float = SAME_CARD_GAP,
                       tolerance: float = TOLERANCE) -> list[dict[str, Any]]:
    """The same card (by identity) measured through this reader and another: when the other
    reader carries it more than ``gap`` faster, this reader is capped at what it delivered.

    ``per_reader``: {reader identity: _best_figures(its results)}. One finding per direction
    with such a card: ``kind`` "same_card", ``ceiling_bytes_per_s`` the best figure of those
    cards through this reader, ``confidence`` "likely" (no card through this reader is faster
    than that by more than ``tolerance``) or "possible", ``cards`` the comparisons, ``rests_on``
    the cards that are one card on the person's word (:func:`as_named`; empty when every card
    is known by its own identity).

    "The same card" is a card known by its own identity (its CID, ATA serial, a stick's or a
    disk's serial) or one the person named (``--name``, the drawer's prompt), in the records of
    both readers (:func:`same_card_basis`). A size or a brand can be two cards (two sticks of one
    size taken for one anonymous card once named a false ceiling), and so can a name read from an
    imported file."""
    names, best, same = per_reader[identity]
    out = []
    for direction in ("read", "write"):
        mine = best[direction]
        pairs: list[dict[str, Any]] = []
        for other, (_, other_best, other_same) in per_reader.items():
            if other == identity:
                continue
            for cid, here in mine.items():
                if cid not in same or cid not in other_same:
                    continue
                there = other_best[direction].get(cid)
                if there is not None and there > here * (1 + gap):
                    named = "named" in (same[cid], other_same[cid])
                    pairs.append({"card": as_named(names[cid]) if named else names[cid], "card_identity": cid,
                                  "rests_on": "name" if named else "identity", "here_bytes_per_s": here,
                                  "other_reader": reader_names.get(other, other), "other_bytes_per_s": there})
        if not pairs:
            continue
        ceiling = max(p["here_bytes_per_s"] for p in pairs)
        faster = [cid for cid, v in mine.items() if v > ceiling * (1 + tolerance)]
        verb = "reads" if direction == "read" else "writes"
        said = "; ".join(f"{p['card']}{',' if p['rests_on'] == 'name' else ''} {verb} "
                         f"{_mbs(p['other_bytes_per_s'])} through the other reader ({p['other_reader']}) but "
                         f"{_mbs(p['here_bytes_per_s'])} here"
                         for p in sorted(pairs, key=lambda p: p["here_bytes_per_s"]))
        evidence = f"the same card through two readers: {said}, so this reader caps {direction}s at {_mbs(ceiling)}"
        if faster:
            evidence += (f"; but {_count(len(faster))} {direction} faster through it "
                         f"({_names(faster, names, mine)}), so it is no hard limit")
        out.append({"kind": "same_card", "direction": direction, "ceiling_bytes_per_s": ceiling,
                    "confidence": "possible" if faster else "likely", "cards": pairs,
                    "cards_at_ceiling": len(pairs), "evidence": evidence,
                    "rests_on": [p["card"] for p in pairs if p["rests_on"] == "name"]})
    return out


def judge_shared(measured: dict[str, Any], *, near: float = SHARED_NEAR, total: float = SHARED_SUM) -> dict[str, Any]:
    """Cards read at once (:func:`cardbench.workloads.shared.read_together`): whether the path
    they share is the ceiling. A finding: ``kind`` "probe", ``direction`` "read",
    ``ceiling_bytes_per_s`` (None when the path carried them all), ``confidence`` ("likely":
    together no faster than the best card alone, though alone they add up to ``total`` times
    more; "possible": together between one card and the sum; "none"), ``evidence``, and the
    measured figures."""
    rows = measured["devices"]
    together = measured.get("together_bytes_per_s") or 0.0
    alone_sum, alone_max = measured["alone_sum_bytes_per_s"], measured["alone_max_bytes_per_s"]
    alone = ", ".join(f"{r['device']} {_mbs(r['alone_bytes_per_s'])}" for r in rows)
    said = (f"{len(rows)} cards read at once: {_mbs(together)} together; alone {alone} "
            f"(sum {_mbs(alone_sum)})")
    if together <= alone_max * (1 + near) and alone_sum >= together * total:
        confidence, ceiling = "likely", together
        evidence = f"{said}: the path they share carries one card's rate, so it is the ceiling: {_mbs(together)}"
    elif together >= alone_sum * (1 - near):
        confidence, ceiling = "none", None
        evidence = f"{said}: the path they share carried them all, so its ceiling is above {_mbs(together)}"
    else:
        confidence, ceiling = "possible", together
        evidence = (f"{said}: more than one card but less than their sum, so the shared path carries about "
                    f"{_mbs(together)}")
    return {"kind": "probe", "direction": "read", "ceiling_bytes_per_s": ceiling, "confidence": confidence,
            "cards_at_ceiling": len(rows), "evidence": evidence, "measured": measured}


def link_finding(group: list[Result]) -> dict[str, Any] | None:
    """What the link itself can carry (USB link speed and protocol, or the SD bus), from the
    newest result of the reader that knows it: an upper bound, not an observation."""
    for r in reversed(group):
        bus = r.target.get("sd_bus") if isinstance(r.target, dict) and isinstance(r.target.get("sd_bus"), dict) else {}
        c = path_ceiling(r.reader, sd_mode=bus.get("mode"), sd_clock_hz=bus.get("clock_hz"))
        if c is not None:
            return {"kind": "link", "direction": "both", "ceiling_bytes_per_s": c.typical_bytes_per_s,
                    "confidence": "upper bound", "cards_at_ceiling": 0,
                    "evidence": f"{c.label}: carries {_mbs(c.typical_bytes_per_s)} typically, "
                                f"{_mbs(c.limit_bytes_per_s)} at best"}
    return None


def reader_ceilings(results: list[Result], *, tolerance: float = TOLERANCE, min_cards: int = MIN_CARDS,
                    spread: float = SPREAD, probes: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per reader, the probable read and write ceilings, from every piece of evidence.

    Each entry: ``identity``, ``name``, ``cards`` (distinct cards measured), then the strongest
    finding (likely > possible > none; direct evidence before clustering, read first on a tie):
    ``ceiling_bytes_per_s`` (None when none is named), ``direction``, ``cards_at_ceiling``,
    ``confidence`` ("likely" | "possible" | "none"), ``kind`` and ``evidence`` (in words),
    ``rests_on`` (the cards it holds for one card on the person's word: "yardstick-1, as you
    named it"; empty when it rests on no name).
    ``findings`` holds both directions' clustering findings in full; ``direct`` the direct
    evidence (the same card through another reader: :func:`same_card_findings`; cards read at
    once: ``probes``, :func:`judge_shared` findings with a ``reader_identity``); ``link`` what
    the link carries (:func:`link_finding`); ``pieces`` all of them, each with its ``kind``
    and ``confidence``, as ``cardbench readers`` shows them.
    """
    groups: OrderedDict[str, list[Result]] = OrderedDict()
    for r in results:
        if r.reader.kind == "stick":
            continue    # no reader: the USB device is the card
        groups.setdefault(r.reader.identity(), []).append(r)
    for p in probes or []:
        groups.setdefault(p.get("reader_identity") or "probe", [])
    per_reader = {identity: _best_figures(group) for identity, group in groups.items()}
    reader_names = {identity: next((r.reader.name for r in reversed(group) if r.reader.name), None) or identity
                    for identity, group in groups.items()}
    out = []
    for identity, group in groups.items():
        name = reader_names[identity]
        if not group:
            name = next((p.get("reader") for p in probes or [] if p.get("reader_identity") == identity), None) or name
        names, best, _ = per_reader[identity]
        modes = card_modes(group)
        findings = [find_ceiling(best["read"], best["write"], names, "read",
                                 tolerance=tolerance, min_cards=min_cards, spread=spread, modes=modes),
                    find_ceiling(best["write"], best["read"], names, "write",
                                 tolerance=tolerance, min_cards=min_cards, spread=spread, modes=modes)]
        for f in findings:
            f["kind"] = "cluster"
        direct = same_card_findings(identity, per_reader, reader_names, tolerance=tolerance)
        direct += [p for p in probes or [] if (p.get("reader_identity") or "probe") == identity]
        candidates = sorted(direct + findings, key=lambda f: (-_RANK[f["confidence"]], _KIND_ORDER[f["kind"]],
                                                               f["direction"] != "read"))
        top = candidates[0]
        evidence = top["evidence"]
        if top["confidence"] == "none":
            evidence = "; ".join(f"{f['direction']}: {f['evidence']}" for f in findings)
        link = link_finding(group)
        out.append({"identity": identity, "name": name, "cards": len(names),
                    "ceiling_bytes_per_s": top["ceiling_bytes_per_s"], "direction": top["direction"],
                    "cards_at_ceiling": top["cards_at_ceiling"], "confidence": top["confidence"],
                    "kind": top["kind"], "evidence": evidence, "rests_on": list(top.get("rests_on") or []),
                    "findings": findings, "direct": direct, "link": link,
                    "pieces": direct + findings + ([link] if link else [])})
    return out


def rejudge_result(result: Result, observed: list[dict[str, Any]] | None) -> bool:
    """Judge one result again, in place, against its path and the observed reader ceilings
    ``observed`` (:func:`reader_ceilings` output): ceiling marks cleared and set again
    (:func:`cardbench.verdicts.ceiling.clear_limits`, then
    :func:`cardbench.verdicts.check_result`). True when anything in the result changed."""
    before = result.to_dict()
    clear_limits(result)
    check_result(result, ssr=result.target.get("ssr_classes"), observed=observed)
    return result.to_dict() != before


def rejudge_reader(store: Any, reader_identity: str) -> list[Result]:
    """Judge every stored result of one reader (``Reader.identity()``) again with the ceilings
    its cards show, save those that changed (``store.save`` replaces by id) and return them.

    Called after each run is saved (``cardbench run``, ``cardbench demo``), so a ceiling learned
    from later cards marks the earlier ones too. Nothing is done for an unnamed reader; see the
    module docstring for which results are judged again.
    """
    if not reader_identity or reader_identity == Reader().identity():
        return []
    results = [r for r in store.results(reader=reader_identity) if r.reader.identity() == reader_identity]
    observed = reader_ceilings(results)
    changed = []
    for result in results:
        if not result.complete or result.source not in REJUDGED_SOURCES:
            continue
        if rejudge_result(result, observed):
            store.save(result)
            changed.append(result)
    return changed
