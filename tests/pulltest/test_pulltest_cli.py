"""`cardbench pulltest` on emulated cards: the JSON document, the words, the confirmation, a hub
that uhubctl cannot switch, Ctrl-C while waiting and --resume."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from cardbench.emulate import EmulatedCard
from cardbench.units import MB
from pull_helpers import SIZE, needs_emulator, records_lost, spec

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "report"))
from chromium_helpers import Chromium, find_chromium, png_pixels  # noqa: E402

pytestmark = [needs_emulator, pytest.mark.slow]

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


def _env(tmp_path) -> dict:
    env = dict(os.environ)
    env.pop("CARDBENCH_DEBUG", None)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")   # the host's log goes here
    env["XDG_DATA_HOME"] = str(tmp_path / "data")     # and the store
    env.pop("CARDBENCH_DB", None)
    return env


def _start(tmp_path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cardbench", "pulltest", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path), stdin=subprocess.DEVNULL)


def _when_writing(card, proc, timeout: float = 60) -> None:
    """Wait until the test writes its cycle (the setup's one flush, then one per record)."""
    deadline = time.monotonic() + timeout
    while card.status()["counters"]["flushes"] < 5:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_json_document_of_a_liar(tmp_path):
    with EmulatedCard(spec("liar")) as card:
        proc = _start(tmp_path, card.device, "--json", "--no-prompt", "--timeout", "60", "--mix", "small",
                      "--confirm", str(SIZE))
        _when_writing(card, proc)
        card.set(drain_rate=0.25 * MB)
        time.sleep(1.5)
        st = card.pull()
        time.sleep(0.3)
        card.reinsert()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "cardbench.pulltest/1" and doc["verdict"] == "loses"
    (pull,) = doc["pulls"]
    for key in ("acknowledged", "lost", "torn", "in_flight", "old_damaged", "lost_ages_s"):
        assert key in pull and key in doc
        if key != "lost_ages_s":
            assert doc[key] == pull[key]
    assert pull["lost"] + pull["torn"] <= records_lost(st) <= pull["lost"] + pull["torn"] + pull["in_flight"]
    assert len(pull["lost_ages_s"]) == pull["lost"] + pull["torn"] > 0
    assert doc["kernel"]["write_cache"] == "write back" and doc["kernel"]["flush_sent"] is True
    assert doc["card"] is not None and doc["device"].startswith("/dev/loop")
    assert doc["answer"].startswith(f"Loses acknowledged writes: {pull['lost'] + pull['torn']:,} of ")
    # stored as a record of kind pulltest: listed by `cardbench results`, exported in its own list
    r = subprocess.run([sys.executable, "-m", "cardbench", "results"], capture_output=True, text=True,
                       env=_env(tmp_path), timeout=60)
    assert "pull test results (1)" in r.stdout and "pulltest: LOSES: Loses acknowledged writes: " in r.stdout
    r = subprocess.run([sys.executable, "-m", "cardbench", "results", "--json"], capture_output=True, text=True,
                       env=_env(tmp_path), timeout=60)
    (stored,) = json.loads(r.stdout)["pulltest"]
    assert stored["id"] == doc["id"] and stored["pulls"] == doc["pulls"]


def test_refused_without_confirmation(tmp_path):
    with EmulatedCard(spec("honest")) as card:
        r = subprocess.run([sys.executable, "-m", "cardbench", "pulltest", card.device, "--no-prompt"],
                           capture_output=True, text=True, env=_env(tmp_path), stdin=subprocess.DEVNULL, timeout=60)
        assert card.status()["counters"]["writes"] == 0
    assert r.returncode == 4
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"cardbench: not confirmed: {card.device}")


@pytest.mark.skipif(shutil.which("uhubctl") is None, reason="needs uhubctl")
def test_power_cut_on_a_hub_uhubctl_cannot_switch(tmp_path):
    """uhubctl runs for real; without a switchable hub here it refuses, and that is one line."""
    with EmulatedCard(spec("honest")) as card:
        r = subprocess.run([sys.executable, "-m", "cardbench", "pulltest", card.device, "--power-cut", "1-1:2",
                            "--after", "0", "--no-prompt", "--confirm", str(SIZE)],
                           capture_output=True, text=True, env=_env(tmp_path), stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 2, r.stderr
    *notes, line = r.stderr.strip().splitlines()     # the setup's note, then the one line
    assert line.startswith("cardbench: uhubctl could not switch off port 2 of hub 1-1: ")
    assert all(n.startswith("Set up: ") for n in notes) and "Traceback" not in r.stderr


def test_ctrl_c_while_waiting_then_resume(tmp_path):
    with EmulatedCard(spec("liar")) as card:
        proc = _start(tmp_path, card.device, "--no-prompt", "--timeout", "60", "--mix", "small",
                      "--confirm", str(SIZE))
        _when_writing(card, proc)
        card.set(drain_rate=0.25 * MB)
        time.sleep(1.0)
        card.pull()
        time.sleep(1.5)                       # it waits for the card, which does not come back
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.strip().splitlines()[-1].startswith("cardbench: interrupted while waiting for the card; "
                                                       "the log is kept")
        (log,) = (tmp_path / "state" / "cardbench" / "pulltest").iterdir()
        device = card.reinsert()
        r = subprocess.run([sys.executable, "-m", "cardbench", "pulltest", device, "--resume"],
                           capture_output=True, text=True, env=_env(tmp_path), stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 0, r.stderr
    answer, pull, *rest = r.stdout.splitlines()
    assert answer.startswith("Loses acknowledged writes: ") and " in 1 of 1 pull" in answer
    assert pull.startswith("  pull 1: ") and " lost, " in pull and rest == []
    assert log.read_text().splitlines()[-1].startswith('{"e":"end"')


def test_by_hand_on_a_named_emulated_card(tmp_path):
    """What the README tells a person: an emulated liar (`cardbench emulate start ... --flush liar`),
    the pull test, `cardbench emulate pull` while it writes, `emulate reinsert`: the verdict."""
    env = _env(tmp_path)
    env["CARDBENCH_EMULATE_ROOT"] = str(tmp_path / "emu")

    def cb(*args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "cardbench", *args], capture_output=True, text=True, env=env,
                           stdin=subprocess.DEVNULL, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    device = cb("emulate", "start", "--name", "pt", "--size", str(SIZE), "--write-rate", "40MB/s",
                "--read-rate", "80MB/s", "--volatile-cache", "512KiB", "--drain-rate", "200MB/s", "--flush", "liar")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "cardbench", "pulltest", device, "--no-prompt", "--mix",
                                 "small", "--timeout", "60", "--confirm", str(SIZE)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while json.loads(cb("emulate", "status", "pt", "--json"))["counters"]["flushes"] < 5:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        cb("emulate", "set", "pt", "--drain-rate", "0.25MB/s")
        time.sleep(1.0)
        assert cb("emulate", "pull", "pt").startswith("pt: pulled; ")
        assert cb("emulate", "reinsert", "pt").startswith("/dev/loop")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.startswith("Loses acknowledged writes: ")
        # what a person sees as it goes, on stderr
        assert "Set up: " in err and "The card went away (cycle 1, " in err and "It is back as /dev/loop" in err
        assert "\npull 1: " in err
    finally:
        cb("emulate", "stop", "pt")


def test_html_report_shows_the_stored_pull_test(tmp_path):
    """A liar's pull test stored in a SQLite file, then `cardbench report --html` from it: the
    pull test section with the verdict, the answer in words and the pull's counts and oldest age."""
    db = str(tmp_path / "pulls.sqlite")
    with EmulatedCard(spec("liar")) as card:
        proc = _start(tmp_path, card.device, "--json", "--no-prompt", "--timeout", "60", "--mix", "small",
                      "--confirm", str(SIZE), "--db", db)
        _when_writing(card, proc)
        card.set(drain_rate=0.25 * MB)
        time.sleep(1.5)
        card.pull()
        time.sleep(0.3)
        card.reinsert()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    doc = json.loads(out)
    (pull,) = doc["pulls"]
    assert doc["verdict"] == "loses" and pull["lost"] + pull["torn"] > 0
    html_file = tmp_path / "report.html"
    r = subprocess.run([sys.executable, "-m", "cardbench", "report", "--html", str(html_file), "--db", db, "--json"],
                       capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["pulltest_results"] == 1
    page = html_file.read_text()
    section = page[page.index('<section id="pulltest">'):]
    section = section[:section.index("</section>")]
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", section)).split())
    assert "Pull tests: does it keep what it acknowledged?" in text
    assert f"loses : {doc['answer']}" in text, text
    assert doc["answer"].startswith("Loses acknowledged writes") and "a flush does not make data durable" in text
    counts = " ".join(f"{pull[k]:,}" for k in ("acknowledged", "intact", "lost", "torn", "in_flight",
                                                "in_flight_torn", "old_damaged"))
    assert f"1 {counts} {max(pull['lost_ages_s']):.2f} s" in text, text
    assert 'class="verdict-loses"' in section and 'The kernel saw the card\'s write cache as "write back"' in text
    assert "Old data damaged: records written before the pull" in text
    # and as a browser shows it (headless Chromium, as tests/report does): no console message, the
    # words in the DOM, the verdict in red on the screenshot
    binary = find_chromium()
    if binary is None:
        assert os.environ.get("CI") != "true", "headless Chromium must run in CI: apt-get install -y chromium"
        print("chromium not installed: the report was not opened in a browser")
        return
    shot = tmp_path / "report.png"
    dom, console = Chromium(binary).render(html_file, shot, width=1000, height=900)
    assert console == [], console
    assert "Pull tests: does it keep what it acknowledged?" in dom and html.escape(doc["answer"], quote=False) in dom
    width, height, rows = png_pixels(shot)
    red = sum(1 for row in rows for i in range(0, len(row), 3) if row[i] > 130 and row[i + 1] < 60 and row[i + 2] < 60)
    assert red > 20, "the verdict is not shown in red"
