"""What the server decides, in-process (Starlette's TestClient over a SQLite store): tokens,
validation, ownership of ids, escaping, and a fuzzed API that never answers 500."""

from __future__ import annotations

import json
import uuid
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from cardbench.progress import Advance, set_total
from cardbench.server import tokens
from cardbench.server.app import create_app
from cardbench.share import LiveProgress
from cardbench.store.core import open_store
from cardbench.store.export import EXPORT_SCHEMA
from serve_helpers import make_result

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("srv") / "lab.sqlite3")
    app = create_app(db, max_body=1 << 20)
    with open_store(db) as store:
        toks = {s: tokens.add(store, s) for s in ("alpha", "beta", "gone")}
        tokens.revoke(store, "gone")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, db, toks


def post(client, doc, token=None, raw=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post("/api/v1/records", content=raw if raw is not None else json.dumps(doc), headers=headers)


def count(db, rid):
    with open_store(db) as s:
        return s.stored_document("result", rid) is not None


def test_token_missing_wrong_or_revoked_is_401_and_stores_nothing(env):
    client, db, toks = env
    r = make_result()
    for token in (None, "cbt_wrong", toks["gone"]):
        resp = post(client, r.to_dict(), token)
        assert resp.status_code == 401, resp.text
        assert set(resp.json()) == {"error"} and "\n" not in resp.json()["error"]
    assert not count(db, r.id)


def test_a_document_from_a_newer_schema_is_400(env):
    client, db, toks = env
    doc = make_result().to_dict()
    doc["schema"] = "cardbench.result/2"
    resp = post(client, doc, toks["alpha"])
    assert resp.status_code == 400 and "newer cardbench" in resp.json()["error"]
    resp = post(client, {"schema": "cardbench.export/3", "results": []}, toks["alpha"])
    assert resp.status_code == 400 and "newer" in resp.json()["error"]
    assert not count(db, doc["id"])


def test_a_truncated_body_is_400(env):
    client, db, toks = env
    r = make_result()
    text = json.dumps(r.to_dict())
    resp = post(client, None, toks["alpha"], raw=text[: len(text) // 2])
    assert resp.status_code == 400 and "not JSON" in resp.json()["error"]
    assert not count(db, r.id)


@pytest.mark.parametrize("value, said", [(float("nan"), "got nan (not finite)"),
                                         (float("inf"), "got inf (not finite)"),
                                         (2**64, "(beyond a 64-bit integer)")])
def test_a_number_that_is_not_finite_or_beyond_64_bits_is_400(env, value, said):
    """NaN and Infinity (which Python's json reads) and a count beyond a store's integers: refused
    in one line naming the key, nothing stored (issue 30, "Bad input")."""
    client, db, toks = env
    doc = make_result().to_dict()
    doc["tests"][0]["runs"][0]["bytes"] = value
    resp = post(client, None, toks["alpha"], raw=json.dumps(doc, allow_nan=True))
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert "tests[0].runs[0].bytes: expected a number" in error and said in error and "\n" not in error
    assert not count(db, doc["id"])
    deep = "[" * 100_000 + "]" * 100_000            # deeper than Python's json goes: 400, not 500
    assert post(client, None, toks["alpha"], raw=deep).status_code == 400


def test_a_body_over_the_limit_is_413(env):
    client, db, toks = env
    resp = post(client, None, toks["alpha"], raw=b"[" + b" " * (1 << 20) + b"]")
    assert resp.status_code == 413 and "limit" in resp.json()["error"] or "at most" in resp.json()["error"]


def test_the_same_record_twice_is_stored_once_and_another_station_is_refused(env):
    client, db, toks = env
    r = make_result(serial=uuid.uuid4().hex[:8])
    assert post(client, r.to_dict(), toks["alpha"]).status_code == 200
    assert post(client, r.to_dict(), toks["alpha"]).status_code == 200     # a retry: stored once
    with open_store(db) as s:
        assert [x.id for x in s.results() if x.id == r.id] == [r.id]
    fresh = make_result()
    both = {"schema": EXPORT_SCHEMA, "cards": [], "results": [fresh.to_dict(), r.to_dict()], "verify": [],
            "probes": [], "sessions": []}
    resp = post(client, both, toks["beta"])
    assert resp.status_code == 403 and "another station" in resp.json()["error"]
    assert not count(db, fresh.id)                    # all of the request or nothing
    with open_store(db) as s:
        assert tokens.station_of_record(s, "result", r.id) == "alpha"
        assert tokens.station_of_record(s, "result", fresh.id) is None


def test_every_typed_name_is_text_not_markup(env):
    client, db, toks = env
    r = make_result(brand=SCRIPT, name=SCRIPT, reader=SCRIPT, serial="xss1")
    assert post(client, r.to_dict(), toks["alpha"]).status_code == 200
    from cardbench.server.pages import card_url, model_key, model_url, reader_url
    for url in ("/", card_url(r.card.identity()), model_url(model_key(r.card)), reader_url(r.reader.identity()),
                "/readers", "/live/alpha", f"/?card={SCRIPT}"):
        page = client.get(url)
        assert page.status_code == 200, url
        assert SCRIPT not in page.text, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text, url
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_the_api_gives_the_export_document(env):
    client, db, toks = env
    r = make_result(brand="ApiCard", serial="api1")
    assert post(client, r.to_dict(), toks["alpha"]).status_code == 200
    doc = client.get("/api/v1/results", params={"card": "ApiCard"}).json()
    assert doc["schema"] == EXPORT_SCHEMA and [x["id"] for x in doc["results"]] == [r.id]
    assert client.get(f"/api/v1/results/{r.id}").json() == r.to_dict()
    assert client.get("/api/v1/results/nope").status_code == 404
    assert client.get("/api/v1/export").json()["schema"] == EXPORT_SCHEMA
    assert client.get("/no/such").status_code == 404


def test_a_read_token_closes_reading(tmp_path):
    app = create_app(str(tmp_path / "r.sqlite3"), read_token="s3cret")
    with TestClient(app) as client:
        assert client.get("/").status_code == 401
        assert client.get("/api/v1/results").json() == {"error": client.get("/api/v1/results").json()["error"]}
        assert client.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids,
                                                                                      max_size=4), max_leaves=12)
FIELDS = ["schema", "id", "card", "reader", "tests", "started_at", "complete", "source", "claims", "target", "host",
          "warnings", "method"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_fuzzed_api_never_answers_500(env, data):
    client, db, toks = env
    how = data.draw(st.sampled_from(["field", "whole", "bytes", "export", "get"]))
    if how == "get":
        path = data.draw(st.sampled_from(["/", "/api/v1/results", "/card/x", "/model/y", "/reader/z"]))
        q = data.draw(st.dictionaries(st.sampled_from(["card", "reader", "since", "until", "test", "page"]),
                                      st.text(max_size=12), max_size=3))
        resp = client.get(path, params=q)
    else:
        doc = make_result().to_dict()
        if how == "field":
            doc[data.draw(st.sampled_from(FIELDS))] = data.draw(json_values)
            body = json.dumps(doc)
        elif how == "whole":
            body = json.dumps(data.draw(json_values))
        elif how == "export":
            body = json.dumps({"schema": EXPORT_SCHEMA, **data.draw(st.dictionaries(
                st.sampled_from(["cards", "results", "verify", "probes", "sessions"]), json_values, max_size=3))})
        else:
            body = data.draw(st.binary(max_size=200))
        resp = post(client, None, toks["alpha"], raw=body)
    assert resp.status_code < 500, (resp.status_code, resp.text)
    assert resp.status_code in (200, 400, 401, 403, 404, 409, 413), resp.text
    if resp.status_code >= 400 and resp.headers["content-type"].startswith("application/json"):
        assert set(resp.json()) == {"error"}


def test_a_station_tells_its_live_page_what_it_does(env):
    client, db, toks = env
    assert client.post("/api/v1/live", json={"task": "x"}).status_code == 401
    assert client.post("/api/v1/live", json={"task": 3}, headers={"Authorization": f"Bearer {toks['beta']}"}) \
        .status_code == 400
    resp = client.post("/api/v1/live", json={"task": f"[card 2, 1 done] seq_write {SCRIPT}", "done": 25, "total": 100},
                       headers={"Authorization": f"Bearer {toks['beta']}"})
    assert resp.status_code == 200
    page = client.get("/live/beta").text
    assert "[card 2, 1 done] seq_write &lt;script&gt;" in page and "25%" in page and SCRIPT not in page


def test_live_progress_shows_the_same_tasks_and_never_waits_for_the_server():
    import time

    seen = []

    class Inner:
        @contextmanager
        def task(self, description, total):
            seen.append(description)
            yield lambda n: seen.append(n)
    p = LiveProgress(Inner(), "http://127.0.0.1:9", "t", every=0.01)     # nothing listens on port 9
    t0 = time.monotonic()
    with p.task("seq_write", 100) as advance:
        for _ in range(100):
            advance(1)
    assert time.monotonic() - t0 < 0.5
    assert seen[0] == "seq_write" and sum(seen[1:]) == 100
    assert p.latest == {"task": "seq_write", "done": 100, "total": 100}


def test_live_progress_passes_a_total_learnt_late_to_the_bar_and_the_live_page():
    totals = []

    class Inner:         # as cli.ui.RichProgress: its advance takes a late total
        @contextmanager
        def task(self, description, total):
            yield Advance(lambda n: None, totals.append)
    p = LiveProgress(Inner(), "http://127.0.0.1:9", "t", every=0.01)     # nothing listens on port 9
    with p.task("raw_read", None) as advance:
        assert p.latest == {"task": "raw_read", "done": 0, "total": None}
        set_total(advance, 500)
        advance(200)
    assert totals == [500]
    assert p.latest == {"task": "raw_read", "done": 200, "total": 500}


def test_a_card_model_is_the_same_from_a_card_and_from_its_stored_row():
    from cardbench.result import Card
    from cardbench.server.pages import model_key, model_key_of_row
    cf = Card(brand="SanDisk", capacity_bytes=64_000_000, ata={"model": "SDCFB-64", "serial": "X1", "sectors": 125000})
    sd = Card(brand="SanDisk", model="SU08G", serial="0x1234", capacity_bytes=8_000_000_000)
    user = Card(brand="Lexar", name="Pro", capacity_bytes=48_000_000, label="4X")
    for card in (cf, sd, user):
        row = {"identity": card.identity(), "brand": card.brand, "name": card.name,
               "capacity_bytes": card.capacity_bytes, "label": card.label, "model": card.model}
        assert model_key_of_row(row) == model_key(card)
    assert model_key(cf) == "ata:SDCFB-64" and model_key(sd) == "model:SanDisk|SU08G"
    assert model_key(Card(brand="SanDisk", model="SU08G", serial="0x9")) == model_key(sd)    # another card, same model


def test_tls_directly_with_the_key_and_certificate_passed_to_uvicorn(tmp_path):
    import shutil
    import ssl
    import subprocess
    import urllib.request

    from serve_helpers import ServeProcess
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True, timeout=60)
    srv = ServeProcess(str(tmp_path / "tls.sqlite3"), "--ssl-keyfile", str(key), "--ssl-certfile", str(cert)).start()
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        with urllib.request.urlopen(srv.url + "/api/v1/results", context=ctx, timeout=10) as resp:
            assert json.loads(resp.read())["schema"] == EXPORT_SCHEMA
    finally:
        srv.stop()


def test_a_model_spread_keeps_its_quartiles_between_lowest_and_highest():
    from cardbench.server.pages import _spread
    s = _spread([1.2, 1.38])
    assert s["low"] <= s["q1"] <= s["median"] <= s["q3"] <= s["high"]


def test_progress_per_card_is_announced_first_kept_as_one_row_and_an_unknown_card_is_409(env):
    from cardbench.server import live
    client, db, toks = env
    alpha, beta = ({"Authorization": f"Bearer {toks[s]}"} for s in ("alpha", "beta"))
    ident = {"brand": "Lexar", "name": f"Pro {SCRIPT}", "capacity_bytes": 32_000_000_000, "identity": "serial:0xA|32e9"}
    first = {"task": "endurance", "done": 10, "total": 100, "card": {"key": "sdb"}}
    resp = client.post("/api/v1/live", json=first, headers=alpha)
    assert resp.status_code == 409 and set(resp.json()) == {"error"}, resp.text
    assert "never announced" in resp.json()["error"] and "\n" not in resp.json()["error"]
    announce = {**first, "card": {"key": "sdb", "identity": ident}, "kind": "endurance", "round": 3,
                "bytes_written": 96_000_000_000, "rate_bytes_per_s": 2e7, "bad_fraction": 0.001, "eta_s": 5400}
    assert client.post("/api/v1/live", json=announce, headers=alpha).status_code == 200
    for done in (20, 50):
        assert client.post("/api/v1/live", json={**first, "done": done}, headers=alpha).status_code == 200
    assert client.post("/api/v1/live", json=first, headers=beta).status_code == 409     # alpha's card, not beta's
    page = client.get("/live/alpha").text
    assert 'data-key="sdb" data-done="50"' in page and "Lexar Pro &lt;script&gt;" in page and SCRIPT not in page
    assert "96.0 GB" in page and "running" in page
    index = client.get("/live").text
    assert 'data-station="alpha"' in index and "endurance 50%" in index and SCRIPT not in index
    ended = {**first, "done": 100, "ended": "rounds"}
    assert client.post("/api/v1/live", json=ended, headers=alpha).status_code == 200
    assert "finished: rounds" in client.get("/live/alpha").text
    with open_store(db) as s:       # one row per card, its latest event; nothing else is stored of it
        rows = s._db.execute("SELECT done, round_no, identity FROM live_cards WHERE station = 'alpha' "
                             "AND card_key = 'sdb'")
        assert len(rows) == 1 and rows[0][0] == 100 and rows[0][1] == 3 and json.loads(rows[0][2]) == ident
        s._db.execute("UPDATE live_cards SET at_epoch = at_epoch - ? WHERE card_key = 'sdb'", (live.KEEP_S + 1,))
    assert 'data-key="sdb"' not in client.get("/live/alpha").text       # idle past KEEP_S: off the page
    with open_store(db) as s:
        assert live.sweep(s) >= 1 and not s._db.execute("SELECT 1 FROM live_cards WHERE card_key = 'sdb'")
    assert client.post("/api/v1/live", json=first, headers=alpha).status_code == 409     # announce again


@pytest.mark.parametrize("card, said", [({"key": "k" * 201}, "card.key is 1 to 200"), ({"key": ""}, "card.key"),
                                        ({"key": "a\nb"}, "card.key"), ("sdb", '"card" is'),
                                        ({"key": "x", "identity": "text"}, "card.identity is")])
def test_a_bad_card_in_a_progress_event_is_400_in_one_line(env, card, said):
    client, db, toks = env
    resp = client.post("/api/v1/live", json={"task": "t", "card": card},
                       headers={"Authorization": f"Bearer {toks['alpha']}"})
    assert resp.status_code == 400 and said in resp.json()["error"] and "\n" not in resp.json()["error"]


def test_progress_numbers_that_are_not_finite_are_dropped_not_stored(env):
    client, db, toks = env
    raw = ('{"task": "nan", "done": NaN, "total": Infinity, "card": {"key": "nan", "identity": {"brand": "X"}}, '
           '"rate_bytes_per_s": -1, "round": 1e400}')
    resp = client.post("/api/v1/live", content=raw, headers={"Authorization": f"Bearer {toks['alpha']}"})
    assert resp.status_code == 200
    with open_store(db) as s:
        assert s._db.execute("SELECT done, total, rate_bytes_per_s, round_no FROM live_cards "
                             "WHERE card_key = 'nan'") == [(None, None, None, None)]
    raw = '{"task": "x", "card": {"key": "n2", "identity": {"brand": NaN}}}'
    resp = client.post("/api/v1/live", content=raw, headers={"Authorization": f"Bearer {toks['alpha']}"})
    assert resp.status_code == 400 and "not finite" in resp.json()["error"]


def test_notices_name_stations_and_keys_only_each_payload_under_postgresqls_8000_bytes():
    from cardbench.server import live
    changes = [(f"station-{i % 7:03d}" + "s" * 90, f"{i:04d}" + "k" * 196) for i in range(500)] + [("st", None)] * 3
    payloads = live.notices(changes)
    assert len(payloads) > 1 and all(len(p.encode()) <= 8000 for p in payloads)
    back = [tuple(pair) for p in payloads for pair in json.loads(p)]
    assert back == list(dict.fromkeys(changes))          # every change once, in order; no document
