"""The I/O layer: everything that moves the bytes of a card.

* :mod:`~cardbench.engine.data` -- opening card data (O_DIRECT, and the one fallback when it is
  refused), ``read_at``/``write_at``, the device's geometry, and f3's wrappers: ``Timed``
  (every transfer timed and counted) and ``Saved`` (save before write);
* :mod:`~cardbench.engine.buffers` -- aligned buffers (huge pages for large sets);
* :mod:`~cardbench.engine.errors` -- the one errno-to-error table;
* :mod:`~cardbench.engine.base` -- the engine interface (fio's ``ioengine_ops``: open, submit,
  reap, close) and the closed loop;
* :mod:`~cardbench.engine.registry` -- engines by name, with declared capabilities;
* :mod:`~cardbench.engine.jobs` -- the workload-level runner (``run_job``) on any engine;
* the engines: :mod:`~cardbench.engine.sync` (pread/pwrite), :mod:`~cardbench.engine.queued`
  (io_uring, :mod:`~cardbench.engine.uring` on the raw ABI of
  :mod:`~cardbench.engine.uring_abi`, or the thread pool of :mod:`~cardbench.engine.threads`)
  and :mod:`~cardbench.engine.fio` (whole jobs through fio).

Importing this package registers the built-in engines.
"""

from cardbench.engine.base import Completion, Engine, IoOp
from cardbench.engine.buffers import AlignedBuffers, aligned_buffer
from cardbench.engine.registry import engine_info, engine_names, get_engine

# the built-in engines register themselves (the core above never imports them)
from cardbench.engine import sync as _sync, queued as _queued, fio as _fio  # noqa: E402,F401  isort: skip

__all__ = ["AlignedBuffers", "Completion", "Engine", "IoOp", "aligned_buffer", "engine_info", "engine_names",
           "get_engine"]
