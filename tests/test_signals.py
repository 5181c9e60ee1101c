"""The one signals module: SIGTERM raises Interrupted inside ``sigterm_raises`` whether or not the
CLI installed its handler first (the CLI's handler no longer turns it into a no-op), the default
action comes back afterwards, and a program's own handler is never replaced."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from cardbench import signals
from cardbench.errors import Interrupted


@pytest.fixture
def sigterm_default():
    old = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, old)


def _term():
    os.kill(os.getpid(), signal.SIGTERM)


def test_block_raises_and_restores_the_default(sigterm_default):
    with pytest.raises(Interrupted, match="SIGTERM"):
        with signals.sigterm_raises() as raises:
            assert raises
            _term()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_under_the_cli_handler_the_block_still_raises(sigterm_default):
    signals.install_sigterm()
    with signals.sigterm_raises() as raises:
        assert raises
        with signals.sigterm_raises():        # nested: still ours
            pass
        with pytest.raises(Interrupted):
            _term()
    assert signals.sigterm_is_handled()        # the CLI's handler stays for the process


def test_a_programs_own_handler_is_left_alone(sigterm_default):
    got = []
    signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    with signals.sigterm_raises() as raises:
        assert not raises
        _term()
    assert got == [signal.SIGTERM]


def test_held_signals_are_recorded_not_raised(sigterm_default):
    signals.install_sigterm()
    with signals.signals_held() as got:
        # to this thread: a process-directed kill may land on a thread an earlier test left
        # running, which does not block it, and be handled after the block is over
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)
    assert got == [signal.SIGTERM] and signals.sigterm_is_handled()


def test_a_signal_while_a_thread_starts_is_raised_once_it_has_started():
    """A SIGTERM that lands inside Thread.start() is held until start() returns, then raised by its
    handler as Interrupted: the thread is started and known to threading (an Interrupted raised
    inside start() made threading's own cleanup fail with KeyError: an internal error, seen in CI)."""
    ran = threading.Event()

    class SignalledOnStart(threading.Thread):
        def start(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)     # the signal arrives while start() runs
            super().start()

    t = SignalledOnStart(target=ran.set, daemon=True)
    with signals.sigterm_raises(), pytest.raises(Interrupted, match="SIGTERM"):
        signals.start_thread(t)
    t.join(5)
    assert ran.is_set() and not t.is_alive()
    assert t not in threading._limbo.values() and t.ident not in threading._active   # noqa: SLF001
