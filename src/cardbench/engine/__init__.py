"""Engines move bytes. One small interface (open, submit, reap, close), several ways to do it.

Modelled on fio's ioengine_ops: a workload prepares operations (``IoOp``), submits them, and
reaps completions with their submit and complete times. ``sync`` does pread/pwrite with
O_DIRECT on aligned buffers, one at a time. See ``get_engine``.
"""

from cardbench.engine.base import Completion, Engine, IoOp, aligned_buffer, get_engine

__all__ = ["Completion", "Engine", "IoOp", "aligned_buffer", "get_engine"]
