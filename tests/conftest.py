"""Shared fixtures over tests/realparts.py."""

from __future__ import annotations

import os
import signal

import pytest

from realparts import ROOT, loop_device, mounted

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def pytest_configure(config):
    """An xdist worker starts with SIGINT ignored (Ctrl-C is the controller's), and every process
    it starts would inherit that: a `cardbench` child would never see the SIGINT a test sends it
    (seen: every Ctrl-C test exited 0, not 130). A worker takes SIGINT as a pytest process does."""
    if hasattr(config, "workerinput") and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """For pytest-xdist's --dist loadgroup (scripts/test.sh): every test is grouped by its file,
    so a module's fixtures (an emulated card, a PostgreSQL server, a mounted filesystem) are set
    up on one worker only. The tests marked ``timing`` come first (scripts/test.sh runs them in a
    pass of their own, apart from the CPU-heavy rest)."""
    timing = [item for item in items if item.get_closest_marker("timing")]
    rest = [item for item in items if not item.get_closest_marker("timing")]
    for item in timing + rest:
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items[:] = timing + rest


@pytest.fixture(scope="session", autouse=True)
def own_user_dirs(tmp_path_factory):
    """This checkout's src/ first on $PYTHONPATH, and the suite's own $XDG_DATA_HOME,
    $XDG_STATE_HOME, $XDG_CACHE_HOME and $XDG_CONFIG_HOME (and no $CARDBENCH_DB) for every test
    and every `cardbench` it starts: the default results database,
    the --preserve journals, the outbox and the verify state are this run's alone. Without it a
    test read the machine user's ~/.local/share/cardbench (seen: a database another checkout had
    upgraded to a newer schema refused every `run` that saves), and every command "recovered" the
    journals another run on the same machine had open."""
    base = tmp_path_factory.mktemp("user-dirs")
    with pytest.MonkeyPatch.context() as mp:
        # every process a test starts (a `python -c` child, an emulator server, a second writer)
        # runs this checkout's cardbench, as the tests do, not whichever `pip install -e` last
        # pointed at (seen: a child of another checkout wrote schema version 3 into a fresh test
        # database this checkout then refused)
        mp.setenv("PYTHONPATH", SRC + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
        for var, sub in (("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"),
                         ("XDG_CACHE_HOME", "cache"), ("XDG_CONFIG_HOME", "config")):
            mp.setenv(var, str(base / sub))
        mp.delenv("CARDBENCH_DB", raising=False)
        yield base


@pytest.fixture
def loop_ext4():
    """A mounted ext4 on a 256 MiB loop device."""
    if not ROOT:
        pytest.skip("needs root for loop devices")
    with loop_device(256 << 20) as dev, mounted(dev) as mnt:
        yield mnt


@pytest.fixture(scope="module")
def shared_ext4():
    """One mounted ext4 (256 MiB loop device) for a module's tests that only read it or remove
    what they write (each asserts it left nothing); mkfs, mount and losetup once a module."""
    if not ROOT:
        pytest.skip("needs root for loop devices")
    with loop_device(256 << 20) as dev, mounted(dev) as mnt:
        yield mnt


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "results.sqlite3")
