"""What a hostile station found (issue 34, "Security"), each a test, in-process (Starlette's
TestClient) over a real SQLite store, and the storing ones over a real PostgreSQL too: NaN and
Infinity (given or derived) refused and never breaking the read API, 400 (not 500) for input too
deep, too large or not UTF-8, 404 for ids no record has, headers on every answer, the read
token's cookie, ids read back as themselves, control characters never reaching a page raw."""

from __future__ import annotations

import json
import math
import re
import sys
import time
import urllib.error
import urllib.request
import uuid
from contextlib import contextmanager
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from cardbench.result import Reader
from cardbench.server import tokens
from cardbench.server.app import create_app
from cardbench.server.pages import card_url
from cardbench.store.core import open_store
from serve_helpers import ServeProcess, cli, make_result


def strict_json(text: str):
    """JSON as the standard says it (no NaN, Infinity): what a browser's JSON.parse takes."""
    def refuse(name):
        raise AssertionError(f"not JSON: bare {name}")
    return json.loads(text, parse_constant=refuse)


@contextmanager
def served(db: str, **kw):
    app = create_app(db, **kw)
    with open_store(db) as store:
        toks = {s: tokens.add(store, s) for s in ("alpha", "beta")}
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, toks


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "lab.sqlite3")
    else:
        server = request.getfixturevalue("pg_server")
        yield server.new_database()


@pytest.fixture
def env(store_url):
    with served(store_url) as (client, toks):
        yield client, store_url, toks


def post(client, token, doc=None, raw=None):
    body = raw if raw is not None else json.dumps(doc, allow_nan=True)
    return client.post("/api/v1/records", content=body, headers={"Authorization": f"Bearer {token}"})


def one_line_error(resp, status):
    assert resp.status_code == status, (resp.status_code, resp.text[:300])
    doc = resp.json()
    assert set(doc) == {"error"} and "\n" not in doc["error"], doc
    return doc["error"]


def read_api_answers(client, ids=()):
    """Every read endpoint answers 200 with JSON (no bare NaN) or HTML."""
    for url in ("/api/v1/results", "/api/v1/export", "/api/v1/records/result", "/api/v1/records/verify",
                *(f"/api/v1/results/{quote(i, safe='')}" for i in ids)):
        resp = client.get(url)
        assert resp.status_code == 200, (url, resp.status_code, resp.text[:300])
        strict_json(resp.text)
    for url in ("/", "/readers", "/live"):
        resp = client.get(url)
        assert resp.status_code == 200, (url, resp.status_code, resp.text[:300])


def set_(path):
    """A mutation setting the key path ``a.b[0].c`` of a result document."""
    def apply(doc, value):
        keys = re.findall(r"[^.\[\]]+|\[\d+\]", path)
        node = doc
        for k in keys[:-1]:
            node = node[int(k[1:-1])] if k.startswith("[") else node.setdefault(k, {})
        last = keys[-1]
        if last.startswith("["):
            node[int(last[1:-1])] = value
        else:
            node[last] = value
    return apply


FREE_FORM = ["tool.name", "tests[0].method.engine", "tests[0].extra.note", "extra.anything", "host.kernel",
             "tests[0].ci95_bytes_per_s", "card.name", "tests[0].runs[0].seconds", "tests[1].runs[2].bytes"]


@pytest.mark.parametrize("where", FREE_FORM)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_or_infinity_anywhere_is_400_and_never_stored(env, where, value):
    client, db, toks = env
    doc = make_result().to_dict()
    set_(where)(doc, value if where != "tests[0].ci95_bytes_per_s" else [value, 1.0])
    error = one_line_error(post(client, toks["alpha"], doc), 400)
    assert "not finite" in error
    assert client.get(f"/api/v1/results/{doc['id']}").status_code == 404
    read_api_answers(client)


def test_a_verify_document_with_nan_in_its_tool_is_400(env):
    client, db, toks = env
    doc = {"schema": "cardbench.verify/1", "id": uuid.uuid4().hex, "tool": math.nan, "card": {"brand": "X"},
           "verdict": "genuine"}
    assert "not finite" in one_line_error(post(client, toks["alpha"], doc), 400)
    assert client.get(f"/api/v1/records/verify/{doc['id']}").status_code == 404


@pytest.mark.parametrize("seconds", [1e-320, 5e-324])
def test_seconds_that_make_an_infinite_rate_are_400(env, seconds):
    """A finite ``seconds`` so small that bytes / seconds overflows: the derived bytes_per_s is
    infinite. Refused by key path, nothing stored; the read API answers as before."""
    client, db, toks = env
    doc = make_result().to_dict()
    doc["tests"][0]["runs"][0]["seconds"] = seconds
    error = one_line_error(post(client, toks["alpha"], doc), 400)
    assert "tests[0].runs[0].bytes_per_s" in error and "not finite" in error, error
    with open_store(db) as s:
        assert s.stored_document("result", doc["id"]) is None
    read_api_answers(client)


def test_a_record_stored_with_nan_by_an_old_version_is_served_as_json(tmp_path):
    """Defence in depth: a record whose stored text holds NaN and Infinity (written before they
    were refused) is read back by every endpoint as JSON with null there; the list stays whole,
    and `cardbench export` writes null, never a bare NaN."""
    db = str(tmp_path / "old.sqlite3")
    good, bad = make_result(brand="Good"), make_result(brand="Old")
    with served(db) as (client, toks):
        assert post(client, toks["alpha"], good.to_dict()).status_code == 200
        assert post(client, toks["alpha"], bad.to_dict()).status_code == 200
        doc = bad.to_dict()
        doc["tests"][0]["runs"][0]["seconds"] = 1e-320
        doc["tests"][0]["extra"] = {"x": math.nan}
        doc["tool"] = {"name": math.inf}
        verify = {"schema": "cardbench.verify/1", "id": "old-verify", "tool": "f3", "card": {"brand": "Old"},
                  "verdict": "genuine", "usable_bytes": 1}
        assert post(client, toks["alpha"], verify).status_code == 200
        with open_store(db) as s:
            s._db.execute("UPDATE runs SET document = ? WHERE result_id = ?", (json.dumps(doc), bad.id))
            s._db.execute("UPDATE verify_results SET document = ? WHERE verify_id = ?",
                          (json.dumps({**verify, "usable_bytes": math.nan}), "old-verify"))
        read_api_answers(client, [good.id, bad.id])
        back = strict_json(client.get(f"/api/v1/results/{bad.id}").text)
        assert back["tests"][0]["runs"][0]["bytes_per_s"] is None and back["tool"]["name"] is None
        assert strict_json(client.get("/api/v1/records/verify/old-verify").text)["usable_bytes"] is None
        assert {r["id"] for r in strict_json(client.get("/api/v1/results").text)["results"]} == {good.id, bad.id}
        assert client.get(card_url(bad.card.identity())).status_code == 200
    out = cli("export", "--db", db)
    assert out.returncode == 0, out.stderr
    assert "NaN" not in out.stdout and "Infinity" not in out.stdout
    assert len(strict_json(out.stdout)["results"]) == 2


def test_import_of_fio_json_with_nan_is_refused_in_one_line(tmp_path):
    fio = {"fio version": "fio-3.33", "jobs": [{"jobname": "w", "job options": {"rw": "write", "bs": "1M"},
                                                "write": {"io_bytes": 1 << 20, "bw_bytes": 1 << 20, "runtime": 1000,
                                                          "lat_ns": {"mean": math.nan}}, "read": {"io_bytes": 0}}]}
    path = tmp_path / "fio.json"
    path.write_text(json.dumps(fio, allow_nan=True))
    db = str(tmp_path / "s.sqlite3")
    r = cli("import", str(path), "--db", db)
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = r.stderr.strip()
    assert "\n" not in line and "mean: expected a number, got nan (not finite)" in line, line
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("what", ["deep-array", "deep-object", "deep-under-limit", "capacity", "digits", "float-bytes",
                                  "surrogate-name", "surrogate-id", "surrogate-key"])
def test_input_too_deep_too_large_or_not_utf8_is_400(env, what):
    client, db, toks = env
    doc = make_result().to_dict()
    raw = None
    if what == "deep-array":
        raw = "[" * 100_000 + "]" * 100_000
    elif what == "deep-object":
        raw = '{"a":' * 100_000 + "1" + "}" * 100_000
    elif what == "deep-under-limit":         # json reads it; the store would keep it; no page could
        doc["extra"] = json.loads("[" * 500 + "]" * 500)
    elif what == "capacity":
        doc["card"]["capacity_bytes"] = 2 ** 64
    elif what == "digits":
        doc["tests"][0]["runs"][0]["bytes"] = 10 ** 3999
    elif what == "float-bytes":              # finite, but no 64-bit count once made whole
        doc["tests"][0]["runs"][0]["bytes"] = 1e300
    elif what == "surrogate-name":
        raw = json.dumps(doc).replace('"brand": "Lexar"', '"brand": "\\ud800"')
    elif what == "surrogate-id":
        raw = json.dumps(doc).replace(doc["id"], "\\ud800" + doc["id"][1:])
    elif what == "surrogate-key":
        doc["extra"] = {"\ud800": 1}
        raw = json.dumps(doc)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 5000))      # the client's json.dumps of a deep test document
    try:
        error = one_line_error(post(client, toks["alpha"], doc, raw=raw), 400)
    finally:
        sys.setrecursionlimit(limit)
    assert "Traceback" not in error
    with open_store(db) as s:
        assert s.stored_document("result", doc["id"]) is None
    read_api_answers(client)


def test_ids_no_record_can_have_are_404_without_the_store_path(env):
    client, db, toks = env
    for rid in ("a" * 60_000, "nope", "abcd", " x"):
        error = one_line_error(client.get("/api/v1/results/" + quote(rid, safe="")), 404)
        assert "no run with id" in error and "sqlite3" not in error and "postgresql" not in error
        assert db not in error
    error = one_line_error(client.get("/api/v1/records/verify/" + "b" * 60_000), 404)
    assert db not in error


def test_every_answer_carries_the_security_headers(tmp_path):
    with served(str(tmp_path / "h.sqlite3"), read_token="rt") as (client, toks):
        answers = [client.get("/no/such/page"), client.get("/static/live.js"), client.put("/api/v1/records"),
                   client.get("/", headers={"Authorization": "Bearer rt"}), client.get("/"),
                   client.get("/api/v1/results", headers={"Authorization": "Bearer rt"}),
                   client.post("/api/v1/records", content=b"{", headers={"Authorization": "Bearer x"})]
        assert [a.status_code for a in answers] == [404, 200, 405, 200, 401, 200, 401]
        for a in answers:
            h = a.headers
            assert "frame-ancestors 'none'" in h["content-security-policy"], a.url
            assert "script-src 'self'" in h["content-security-policy"]
            assert h["x-frame-options"] == "DENY" and h["x-content-type-options"] == "nosniff", a.url


def test_a_browser_opened_with_the_token_gets_a_cookie_and_every_link_works(tmp_path):
    db = str(tmp_path / "c.sqlite3")
    r = make_result(brand="Cookie", serial="c1")
    with served(db, read_token="s3cret-token") as (client, toks):
        assert post(client, toks["alpha"], r.to_dict()).status_code == 200
        assert client.get("/?token=wrong", follow_redirects=False).status_code == 401
        for odd in ("%C3%A9t%C3%A9", "%00", "s3cret-token%20"):      # compared as bytes: 401, never a 500
            assert client.get(f"/?token={odd}", follow_redirects=False).status_code == 401
            assert client.get(f"/api/v1/results?token={odd}").status_code == 401
        first = client.get("/?token=s3cret-token&card=Cookie", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/?card=Cookie"
        cookie = first.headers["set-cookie"]
        assert cookie.startswith("cardbench_read=s3cret-token;")
        for attr in ("HttpOnly", "SameSite=strict", "Path=/"):
            assert attr.lower() in cookie.lower(), cookie
        odd = client.get(card_url("serial:%2F:1") + "?token=s3cret-token", follow_redirects=False)
        assert odd.status_code == 303 and odd.headers["location"] == card_url("serial:%2F:1")
        page = client.get("/?card=Cookie")            # the client keeps the cookie, as a browser does
        assert page.status_code == 200 and "s3cret-token" not in page.text
        links = set(re.findall(r'href="([^"]+)"', page.text)) | set(re.findall(r'src="([^"]+)"', page.text))
        assert links
        for link in links:
            got = client.get(link.replace("&amp;", "&"))
            assert got.status_code == 200, (link, got.status_code, got.text[:200])
        client.cookies.clear()
        assert client.get("/live/alpha/events").status_code == 401
        assert client.get("/api/v1/results?token=s3cret-token").status_code == 200    # scripts: no redirect
    # the live stream (endless: a real server, read to its first line) takes the cookie
    srv = ServeProcess(db, "--read-token", "s3cret-token")
    try:
        srv.start()
        req = urllib.request.Request(srv.url + "/live/alpha/events", headers={"Cookie": cookie.split(";")[0]})
        with urllib.request.urlopen(req, timeout=10) as events:
            assert events.status == 200 and events.readline().strip() == b": connected"
        with pytest.raises(urllib.error.HTTPError) as no:
            urllib.request.urlopen(srv.url + "/live/alpha/events", timeout=10)
        assert no.value.code == 401
    finally:
        srv.stop()


def test_ids_with_a_slash_or_a_space_are_read_back_as_themselves_or_refused(env):
    client, db, toks = env
    slash = make_result(brand="Slash")
    slash.id = "lab/2024/" + uuid.uuid4().hex
    assert post(client, toks["alpha"], slash.to_dict()).status_code == 200, slash.id
    back = client.get("/api/v1/results/" + quote(slash.id, safe=""))
    assert back.status_code == 200 and back.json()["card"]["brand"] == "Slash"
    verify = {"schema": "cardbench.verify/1", "id": "v/1 x", "tool": "f3", "card": {"brand": "Slash"},
              "verdict": "genuine"}
    assert post(client, toks["alpha"], verify).status_code == 200
    assert client.get("/api/v1/records/verify/" + quote("v/1 x", safe="")).json()["id"] == "v/1 x"
    theirs = make_result(brand="Theirs")
    assert post(client, toks["beta"], theirs.to_dict()).status_code == 200
    for bad in (" " + theirs.id, theirs.id + " ", theirs.id[:8] + "\x00", "x" * 201):
        mine = make_result(brand="Mine")
        mine.id = bad
        assert "id" in one_line_error(post(client, toks["alpha"], mine.to_dict()), 400)
        resp = client.get("/api/v1/results/" + quote(bad, safe=""))
        assert resp.status_code == 404, (bad, resp.text[:200])      # never another station's record


def test_a_nul_or_control_character_in_a_name_never_reaches_a_page_raw(env):
    client, db, toks = env
    r = make_result(brand="Nul\x00Brand\x1b[31m", name="a\x7fb\x85c", reader="Rd\x00r", serial="nul1")
    assert post(client, toks["alpha"], r.to_dict()).status_code == 200
    for url in ("/", card_url(r.card.identity()), "/readers", "/live/alpha"):
        page = client.get(url)
        assert page.status_code == 200, url
        assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", page.text), url
        assert ("Rd\ufffdr" if url == "/readers" else "Nul\ufffdBrand\ufffd[31m") in page.text, url


def test_the_first_station_to_share_a_card_names_it_and_no_other_station_renames_it(env):
    """Station B shares a run of card serial:0xB0B..., brand Lexar, through its reader. Station A
    shares a run of its own naming the same card and reader otherwise (brand "EVIL"). A's record
    is stored as sent (its own view, shown as A's); the card's and the reader's rows, and so every
    page and the API's cards, keep B's names. B may rename them itself."""
    client, db, toks = env
    serial = "0xB0B" + uuid.uuid4().hex[:8]
    usb = {"vendor_id": "0bda", "product_id": "0158", "serial": serial}

    def run(brand, name, reader_name):
        r = make_result(brand=brand, name=name, serial=serial)
        r.reader = Reader(name=reader_name, **usb)
        return r
    b = run("Lexar", "Professional", "B's bench reader")
    assert post(client, toks["beta"], b.to_dict()).status_code == 200
    a = run("EVIL", "pwned", "EVIL reader")
    assert post(client, toks["alpha"], a.to_dict()).status_code == 200
    ident, reader_ident = b.card.identity(), b.reader.identity()
    assert a.card.identity() == ident and a.reader.identity() == reader_ident

    with open_store(db) as s:
        row = next(c for c in s.cards() if c["identity"] == ident)
        assert (row["brand"], row["name"]) == ("Lexar", "Professional")
        assert next(r for r in s.readers() if r["identity"] == reader_ident)["name"] == "B's bench reader"
        assert tokens.namer(s, "card", ident) == "beta"
    # the API: the export's cards are the rows; each record is its station's own
    export = client.get("/api/v1/results", params={"card": serial}).json()
    assert [(c["brand"], c["name"]) for c in export["cards"]] == [("Lexar", "Professional")]
    assert client.get(f"/api/v1/results/{a.id}").json()["card"]["brand"] == "EVIL"
    # the pages: the card's title is B's; A's names appear only as A's
    page = client.get(card_url(ident)).text
    title = re.search(r"<h1>(.*?)</h1>", page).group(1)
    assert "Lexar Professional" in title and "EVIL" not in title
    assert "named by station beta" in page
    others = re.search(r'<div id="other-names">(.*?)</div>', page, re.S).group(1)
    assert "station alpha: EVIL pwned" in others and "beta" not in others
    readers = client.get("/readers").text
    assert "B&#x27;s bench reader" in readers and "EVIL reader" not in readers
    reader_page = client.get("/reader/" + quote(reader_ident, safe="")).text
    assert "Reader: B&#x27;s bench reader" in reader_page
    # a verify document of A naming the card does not rename it either
    verify = {"schema": "cardbench.verify/1", "id": uuid.uuid4().hex, "tool": "f3", "verdict": "fake",
              "card": {"brand": "EVIL2", "serial": serial, "capacity_bytes": b.card.capacity_bytes}}
    assert post(client, toks["alpha"], verify).status_code == 200
    with open_store(db) as s:
        assert next(c for c in s.cards() if c["identity"] == ident)["brand"] == "Lexar"
    # the namer renames its own card
    b2 = run("Lexar", "Professional 1066x", "B's bench reader")
    assert post(client, toks["beta"], b2.to_dict()).status_code == 200
    with open_store(db) as s:
        assert next(c for c in s.cards() if c["identity"] == ident)["name"] == "Professional 1066x"


def test_a_flood_of_live_events_from_one_station_is_429_and_others_pass(tmp_path):
    db = str(tmp_path / "flood.sqlite3")
    with served(db, live_rate=5, upload_rate=2) as (client, toks):
        def live(station):
            return client.post("/api/v1/live", json={"task": "seq_write", "done": 1, "total": 2},
                               headers={"Authorization": f"Bearer {toks[station]}"})
        t0 = time.monotonic()
        answers = [live("alpha") for _ in range(40)]
        took = time.monotonic() - t0
        codes = [a.status_code for a in answers]
        # a burst of 2 s (10 events), then 5 a second
        assert codes[:10] == [200] * 10 and codes.count(200) <= 10 + 5 * took + 1 and 429 in codes, (codes, took)
        refused = next(a for a in answers if a.status_code == 429)
        assert one_line_error(refused, 429) == "slow down: 5 events/s allowed"
        assert 1 <= int(refused.headers["retry-after"]) <= 2
        assert live("beta").status_code == 200          # another station is not slowed
        # uploads, with --upload-rate: the same rule, and nothing of a refused one is stored
        docs = [make_result(serial=f"up{i}").to_dict() for i in range(16)]
        t0 = time.monotonic()
        codes = [post(client, toks["alpha"], d).status_code for d in docs]
        took = time.monotonic() - t0
        assert codes[:4] == [200] * 4 and codes.count(200) <= 4 + 2 * took + 1 and 429 in codes, (codes, took)
        with open_store(db) as s:
            assert [s.stored_document("result", d["id"]) is not None for d in docs] == [c == 200 for c in codes]
        assert post(client, toks["beta"], make_result().to_dict()).status_code == 200


def test_serve_takes_the_live_rate_as_an_option(tmp_path):
    db = str(tmp_path / "opt.sqlite3")
    token = cli("serve", "token", "add", "st", "--db", db).stdout.strip()
    srv = ServeProcess(db, "--live-rate", "1")
    try:
        srv.start()
        codes = []
        for _ in range(5):
            req = urllib.request.Request(srv.url + "/api/v1/live", data=b'{"task": "x"}', method="POST",
                                         headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    codes.append(resp.status)
            except urllib.error.HTTPError as e:
                codes.append(e.code)
                assert json.loads(e.read()) == {"error": "slow down: 1 events/s allowed"}
                assert e.headers["Retry-After"] == "1"
        assert codes[:2] == [200, 200] and codes[2:].count(429) >= 2, codes
    finally:
        srv.stop()


ODD_GETS = ["/?card=%ED%A0%80", "/card/%ED%A0%80", "/card/%00", "/api/v1/results?since=%00", "/api/v1/results?card=%00",
            "/api/v1/results?test=%00", "/api/v1/records/verify?reader=%00", "/reader/%00", "/model/%00",
            "/live/%00", "/live/%ED%A0%80", "/api/v1/results/%00abc", "/api/v1/records/verify/%00",
            "/?page=99999999999999999999", "/?page=-5", "/api/v1/results?since=99999999999999999999",
            "/api/v1/results?until=-1e400", "/api/v1/records/%00", "/api/v1/results/%ED%A0%80"]


def test_odd_reads_are_never_a_store_failure(env):
    """Queries and paths with NUL, a surrogate's bytes, numbers past 64 bits: 200, 400 or 404,
    one line, on both stores (a page past any offset was 'bigint out of range', 503, on PostgreSQL)."""
    client, db, toks = env
    for url in ODD_GETS:
        resp = client.get(url)
        assert resp.status_code in (200, 400, 404), (url, resp.status_code, resp.text[:200])
        if resp.headers["content-type"].startswith("application/json") and resp.status_code != 200:
            one_line_error(resp, resp.status_code)
