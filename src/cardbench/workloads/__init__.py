"""Workloads: what is timed on a target (files and cold reads, raw device sweeps, random and
sequential patterns, the matrix, the sustained write, the shared-reader probe), over the one I/O
layer (:mod:`cardbench.engine`)."""
