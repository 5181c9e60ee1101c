"""Signals: the one module of cardbench that installs signal handlers.

cardbench's rule: SIGTERM means what Ctrl-C means -- stop, clean up (``finally`` blocks remove
test files, restore saved bytes, detach emulated cards), exit 130 with one line. Python does this
for SIGINT by itself (KeyboardInterrupt); for SIGTERM a handler raises
:class:`~cardbench.errors.Interrupted`.

* :func:`install_sigterm` -- the CLI's handler, for the whole process;
* :func:`sigterm_raises` (and :func:`acquire_sigterm`/:func:`release_sigterm` for objects that
  live longer than a block) -- the same for library callers (a workload, an emulated card): the
  handler is installed where SIGTERM still has its default action, kept where this module's
  handler is already in place (the CLI's, or an outer block's), and never put over a handler
  the program installed itself (the program decides then);
* :func:`signals_held` -- SIGINT/SIGTERM held off (blocked, and recorded) while saved bytes are
  written back, so a restore is never left half done; the caller decides afterwards;
* :func:`signals_deferred` -- SIGINT/SIGTERM/SIGHUP blocked for a block and delivered at its
  end (cleanup that must not be cut in half);
* :func:`start_thread` -- ``Thread.start()`` with SIGINT/SIGTERM held, the signal sent again
  once the thread runs (an exception raised inside ``start()`` breaks threading's own books).

Handlers can only be installed from the main thread; elsewhere these are no-ops (blocking
still applies to the calling thread).
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from cardbench.errors import Interrupted

_lock = threading.Lock()
_users = 0
_previous: Any = None


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(f"stopped by {signal.Signals(signum).name}; cleanup has run")


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def install_sigterm() -> None:
    """SIGTERM raises Interrupted from now on (the CLI does this first thing)."""
    if _main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupted)


def sigterm_is_handled() -> bool:
    """Whether SIGTERM raises Interrupted right now (this module's handler is in place)."""
    return signal.getsignal(signal.SIGTERM) is _raise_interrupted


def acquire_sigterm() -> bool:
    """Make SIGTERM raise Interrupted until the matching :func:`release_sigterm` (for objects
    whose life is not one ``with`` block, e.g. an emulated reader). Returns whether a release is
    owed (False: another thread, already the process-wide handler, or the program's own)."""
    global _users, _previous
    if not _main_thread():
        return False
    with _lock:
        current = signal.getsignal(signal.SIGTERM)
        if current is _raise_interrupted and _users == 0:
            return False          # installed for the whole process (the CLI): nothing to undo
        if current is not _raise_interrupted and current is not signal.SIG_DFL:
            return False          # the program's own handler: leave it alone
        if _users == 0:
            _previous = current
            signal.signal(signal.SIGTERM, _raise_interrupted)
        _users += 1
        return True


def release_sigterm(owed: bool) -> None:
    """Undo one :func:`acquire_sigterm` that returned True (the last one restores the default)."""
    global _users
    if not owed:
        return
    with _lock:
        _users -= 1
        if _users == 0 and _main_thread():
            signal.signal(signal.SIGTERM, _previous or signal.SIG_DFL)


@contextmanager
def sigterm_raises() -> Iterator[bool]:
    """While inside, SIGTERM raises Interrupted (so ``finally`` blocks clean up). Yields whether
    SIGTERM raises inside (False: another thread, or a handler of the program's own)."""
    owed = acquire_sigterm()
    try:
        yield sigterm_is_handled()
    finally:
        release_sigterm(owed)


@contextmanager
def signals_held() -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM while restoring (or saving); yields a list that receives the signals
    that came. The caller decides what to do about them afterwards.

    Two things are needed: the signals are blocked, and (in the main thread) their Python
    handlers are swapped for one that only records. A signal that arrived just before the block
    has already been caught at the C level; Python would run its handler at the next bytecode
    boundary, inside the held region, and raise there (a restore half done). The recording
    handler takes it instead."""
    got: list[int] = []
    sigs = {signal.SIGINT, signal.SIGTERM}
    handlers: dict[int, Any] = {}
    if _main_thread():
        def record(signum, frame):
            got.append(int(signum))
        for s in sigs:
            try:
                handlers[s] = signal.signal(s, record)
            except (OSError, ValueError):
                pass
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (OSError, ValueError):
        old = None
    try:
        yield got
    finally:
        if old is not None:
            try:
                pending = signal.sigpending() & sigs
            except OSError:
                pending = set()
            for s in pending:
                try:
                    signal.sigwait({s})   # consume it: the caller raises Interrupted itself
                except OSError:
                    pass
                got.append(int(s))
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, handler)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP until the block ends (so cleanup is not interrupted halfway).

    Pending signals are delivered (and raise, e.g. KeyboardInterrupt) when the block exits.
    """
    sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def start_thread(thread: threading.Thread) -> threading.Thread:
    """Start ``thread`` with SIGINT/SIGTERM held, then send the process what came meanwhile.

    A handler that raises (Ctrl-C's KeyboardInterrupt, SIGTERM's Interrupted) at a bytecode
    boundary inside ``Thread.start()`` leaves threading's bookkeeping half done: its ``except``
    path deletes the thread from ``threading._limbo`` after the new thread already did, and the
    KeyError hides the interrupt (a SIGTERM at that moment ended a run as "internal error:
    KeyError: <Thread ...>", about one time in twelve). Held, the signal waits until ``start()``
    has returned; sent again, it is raised by its own handler where the caller's ``finally``
    blocks clean up as usual. The new thread starts with the signals blocked, as it should: only
    the main thread handles them."""
    with signals_held() as got:
        thread.start()
    for signum in dict.fromkeys(got):
        os.kill(os.getpid(), signum)
    return thread
