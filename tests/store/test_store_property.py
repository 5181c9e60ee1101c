"""Any result survives save/get unchanged (hypothesis)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cardbench.result import Card, Reader, Result, Run, TestResult
from cardbench.store import open_store

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53),
                        st.floats(allow_nan=False, allow_infinity=False), text)
json_value = st.recursive(json_scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                               st.dictionaries(text, inner, max_size=3)),
                          max_leaves=8)
runs = st.builds(Run, bytes=st.integers(0, 2**50), seconds=st.just(0.0) | st.floats(1e-6, 1e6),
                 ops=st.none() | st.integers(0, 10**9), offset=st.none() | st.integers(0, 2**50),
                 latency_s=st.none() | st.dictionaries(st.sampled_from(["p50", "p99", "max"]),
                                                       st.floats(0, 10), max_size=3),
                 extra=st.dictionaries(text, json_value, max_size=2))
tests = st.builds(TestResult, name=st.sampled_from(["seq_write", "cold_read", "raw_read", "rand_read_4k_q1t1"]),
                  method=st.dictionaries(text, json_value, max_size=4), runs=st.lists(runs, max_size=5),
                  warmup=st.lists(runs, max_size=2), warnings=st.lists(text, max_size=2), complete=st.booleans(),
                  limited_by=st.none() | text, extra=st.dictionaries(text, json_value, max_size=2))
results = st.builds(
    Result, target=st.dictionaries(text, json_value, max_size=3),
    card=st.builds(Card, name=st.none() | text, brand=st.none() | text,
                   capacity_bytes=st.none() | st.integers(1, 2**45), label=st.none() | text,
                   serial=st.none() | text, model=st.none() | text),
    reader=st.builds(Reader, name=st.none() | text, vendor_id=st.none() | st.just("0bda"),
                     product_id=st.none() | st.just("0158"), link_speed_mbit=st.none() | st.floats(1, 1e4)),
    tests=st.lists(tests, max_size=3), warnings=st.lists(text, max_size=2),
    claims=st.lists(st.dictionaries(st.sampled_from(["label", "verdict", "test", "x"]), json_value, max_size=3),
                    max_size=2),
    complete=st.booleans(), error=st.none() | text, host=st.dictionaries(text, json_value, max_size=3),
    source=st.sampled_from(["run", "import", "import-fio"]))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rs=st.lists(results, min_size=1, max_size=3))
def test_save_get_round_trip(rs):
    with tempfile.TemporaryDirectory() as d, open_store(Path(d) / "p.db") as store:
        for r in rs:
            store.save(r)
        for r in rs:
            assert store.get(r.id) == r
        assert {x.id for x in store.results()} == {r.id for r in rs}
        assert store.check() == []
