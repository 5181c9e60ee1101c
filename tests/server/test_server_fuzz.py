"""A hostile station, fuzzed (issue 34, "Security"): thousands of mutated documents posted through
the real app (Starlette's TestClient) over a real SQLite store, and a smaller run over a real
PostgreSQL. Non-finite numbers, tiny seconds, huge integers, lone surrogates, NUL and control
characters, deep nesting, odd ids (with ``/``, spaces, NUL, too long) and wrong types, put at any
key of a result, a verify document or an export, one to three at a time; bodies that are not
JSON; live events. No answer is a 500; every answer is 2xx or 4xx, an error one line of JSON; and
after the run every read endpoint still answers 200 with JSON (no bare NaN) or HTML.

Derandomized (the same cases every run), so a failure here is a failure every time.
"""

from __future__ import annotations

import json
import math
import uuid
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from cardbench import kinds
from cardbench.server import tokens
from cardbench.server.app import create_app
from cardbench.server.pages import card_url
from cardbench.store.core import open_store
from cardbench.store.export import EXPORT_SCHEMA
from cardbench_factories import key_paths, mangled
from serve_helpers import make_result

SQLITE_CASES = 2000
POSTGRES_CASES = 300


def deep(n: int):
    node: list = []
    for _ in range(n):
        node = [node]
    return node


BAD_NUMBERS = [math.nan, math.inf, -math.inf, 1e-320, 5e-324, 1e308, -1e308, 2 ** 63, 2 ** 64, -(2 ** 63) - 1,
               10 ** 400, 0, -1, 0.0, -0.0, 1.5]
BAD_TEXT = ["\ud800", "a\udfffb", "\x00", "x\x00y", "\x1b[31m", "\x7f\x85", "<script>alert(1)</script>", "",
            " ", "é" * 300, "x" * 5000]
ODD_IDS = [" lead", "trail ", "a/b", "/", "../../etc/passwd", "%2F", "id\x00nul", "\ud800", "x" * 201, "",
           "?q=1", "#frag", "a b", "\t", "ok-id-" + "f" * 32]
WRONG_TYPES = [None, True, False, [], {}, [1, 2], {"a": 1}, "text", 3]
DEPTHS = [63, 64, 65, 100, 500]
KINDS_OF_BAD = ["number", "text", "id", "type", "deep", "drop"]


def base_documents() -> dict[str, dict]:
    result = make_result(curves=True, serial="fz").to_dict()
    result["tool"] = {"name": "cardbench", "version": "1"}
    result["extra"] = {"note": "fuzz", "list": [1, 2.5, "x"]}
    result["tests"][0]["extra"] = {"positions": [[0, 1.0]]}
    verify = {"schema": kinds.VERIFY_SCHEMA, "id": "v-" + uuid.uuid4().hex, "tool": "f3", "verdict": "genuine",
              "usable_bytes": 48_000_000, "card": {"brand": "Fz", "serial": "fz-v", "capacity_bytes": 48_000_000},
              "reader": {"name": "fz reader"}, "created_at": "2024-05-01T10:00:00+00:00"}
    export = {"schema": EXPORT_SCHEMA, "cards": [{"identity": result["card"]["identity"]},
                                                 {"identity": "serial:fz-v:48000000"}],
              "results": [make_result(serial="fz-e").to_dict()], "verify": [dict(verify, id="v-" + uuid.uuid4().hex)],
              "probes": [], "sessions": []}
    export["cards"].append({"identity": export["results"][0]["card"]["identity"]})
    return {"result": result, "verify": verify, "export": export}


BASES = base_documents()
PATHS = {name: [p for p in key_paths(doc) if p] for name, doc in BASES.items()}


@st.composite
def bad_value(draw):
    what = draw(st.sampled_from(KINDS_OF_BAD))
    if what == "number":
        return draw(st.sampled_from(BAD_NUMBERS))
    if what == "text":
        return draw(st.sampled_from(BAD_TEXT))
    if what == "id":
        return draw(st.sampled_from(ODD_IDS))
    if what == "type":
        return draw(st.sampled_from(WRONG_TYPES))
    if what == "deep":
        return deep(draw(st.sampled_from(DEPTHS)))
    return "drop"


@st.composite
def mutated(draw):
    """(body bytes, where: records or live)."""
    how = draw(st.sampled_from(["document"] * 8 + ["raw", "live"]))
    if how == "raw":
        raw = draw(st.sampled_from([
            "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000, '{"schema": "cardbench.result/1"',
            '"\\ud800"', '{"schema": "cardbench.result/1", "id": "\\udc00"}', "NaN", "Infinity", "-Infinity",
            "1" * 5000, "1e999999", "", "null", "[]", "{}"]))
        return raw.encode("utf-8", "surrogatepass") + draw(st.sampled_from([b"", b"\xff\xfe"])), "records"
    if how == "live":
        doc = {"task": "seq_write", "done": 1, "total": 2}
        doc[draw(st.sampled_from(["task", "done", "total", "other"]))] = draw(bad_value())
        return json.dumps(doc, allow_nan=True).encode("ascii"), "live"
    name = draw(st.sampled_from(sorted(BASES)))
    doc = json.loads(json.dumps(BASES[name]))
    doc_id = uuid.uuid4().hex if name != "verify" else "v-" + uuid.uuid4().hex
    if name == "export":
        doc["results"][0]["id"] = doc_id
        doc["verify"][0]["id"] = "v-" + uuid.uuid4().hex
    else:
        doc["id"] = doc_id
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in key_paths(doc) if p]
        path = draw(st.sampled_from(paths if draw(st.booleans()) else PATHS[name]))
        try:
            doc = mangled(doc, path, draw(bad_value()))
        except (KeyError, IndexError, TypeError):      # a path an earlier mutation took away
            continue
        except (ValueError, RecursionError):            # mangled's copy through json: a deep value
            doc = json.loads(json.dumps(doc))
    # ASCII JSON: a lone surrogate goes as its escape "\\ud800", as a hostile client would send it
    return json.dumps(doc, allow_nan=True).encode("ascii"), "records"


def strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"not JSON: bare {name}")
    return json.loads(text, parse_constant=refuse)


def check_answer(resp, stored: set[str]) -> None:
    assert resp.status_code != 500, resp.text[:500]
    assert 200 <= resp.status_code < 300 or 400 <= resp.status_code < 500, (resp.status_code, resp.text[:300])
    doc = strict_json(resp.text)
    if resp.status_code >= 400:
        assert set(doc) == {"error"} and isinstance(doc["error"], str), doc
        assert "\n" not in doc["error"] and "Traceback" not in doc["error"], doc
    elif "ids" in doc:
        stored.update(doc["ids"])


def fuzz(client, token: str, cases: int) -> set[str]:
    stored: set[str] = set()
    sent = [0]

    @settings(max_examples=cases, derandomize=True, deadline=None, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(case=mutated())
    def one(case):
        body, where = case
        resp = client.post("/api/v1/records" if where == "records" else "/api/v1/live", content=body,
                           headers={"Authorization": f"Bearer {token}"})
        sent[0] += 1
        check_answer(resp, stored)
    one()
    assert sent[0] >= cases, f"only {sent[0]} cases were sent"
    return stored


def read_everything(client, db: str, stored: set[str]) -> None:
    """Every read endpoint, after the fuzz: 200, JSON without a bare NaN, or HTML."""
    for url in ["/api/v1/results", "/api/v1/export", "/api/v1/results?card=fz", "/api/v1/export?reader=fz",
                *(f"/api/v1/records/{k.name}" for k in kinds.kinds())]:
        resp = client.get(url)
        assert resp.status_code == 200, (url, resp.status_code, resp.text[:300])
        strict_json(resp.text)
    with open_store(db) as s:
        results = {r.id for r in s.results()}
        verify = {d["id"] for d in s.records("verify")}
        cards = [c["identity"] for c in s.cards()]
    assert stored and stored <= results | verify, "every id the server said it stored is stored"
    for rid in sorted(results):
        resp = client.get("/api/v1/results/" + quote(rid, safe=""))
        assert resp.status_code == 200 and strict_json(resp.text)["id"] == rid, (rid, resp.text[:300])
    for rid in sorted(verify):
        resp = client.get("/api/v1/records/verify/" + quote(rid, safe=""))
        assert resp.status_code == 200 and strict_json(resp.text)["id"] == rid, (rid, resp.text[:300])
    for url in ["/", "/?page=2", "/readers", "/live", "/live/alpha", *(card_url(c) for c in cards[:40])]:
        resp = client.get(url)
        assert resp.status_code == 200, (url, resp.status_code, resp.text[:300])
        assert resp.headers["content-type"].startswith("text/html") and "</html>" in resp.text, url


def run(db: str, cases: int) -> None:
    app = create_app(db, live_rate=0)           # the flood limit has a test of its own
    with open_store(db) as store:
        token = tokens.add(store, "alpha")
    with TestClient(app, raise_server_exceptions=False) as client:
        stored = fuzz(client, token, cases)
        read_everything(client, db, stored)


@pytest.mark.slow
def test_a_fuzzed_station_never_gets_a_500_nor_breaks_reading_sqlite(tmp_path):
    run(str(tmp_path / "fuzz.sqlite3"), SQLITE_CASES)


@pytest.mark.slow
def test_a_fuzzed_station_never_gets_a_500_nor_breaks_reading_postgresql(pg_server):
    run(pg_server.new_database(), POSTGRES_CASES)
