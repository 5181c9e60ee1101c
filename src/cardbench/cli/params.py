"""Click callbacks that read units at the edge (cardbench.units): ``--size 16MB``, ``--time-budget 30s``.

A value that cannot be read becomes click's BadParameter, which the main entry point prints as
one line with exit code 2.
"""

from __future__ import annotations

import click

from cardbench.units import UnitError, parse_duration, parse_size


def size(ctx, param, value):
    """``16MB``, ``64MiB``, ``4096`` -> bytes (None stays None)."""
    if value is None:
        return None
    try:
        return parse_size(value)
    except UnitError as e:
        raise click.BadParameter(str(e)) from None


def seconds(ctx, param, value):
    """``10``, ``10s``, ``250ms``, ``2m`` -> seconds > 0 (None stays None)."""
    if value is None:
        return None
    try:
        return parse_duration(value)
    except UnitError as e:
        raise click.BadParameter(str(e)) from None
