"""Flash geometry: the allocation unit (AU) and page a card's read timing shows, the AUs it keeps
open for writing and its FAT-tuned first AUs, and the advice that follows (partition alignment,
cluster sizes, mkfs commands).

* :mod:`~cardbench.geometry.steps` -- the step detector (pure statistics);
* :mod:`~cardbench.geometry.timing` -- the read pass (read-only);
* :mod:`~cardbench.geometry.writes` -- the write pass (open AUs, FAT AUs);
* :mod:`~cardbench.geometry.partitions` -- the partitions, from sysfs or the device's table;
* :mod:`~cardbench.geometry.advice` -- the advice in words and commands;
* :mod:`~cardbench.geometry.doc` -- the ``cardbench.geometry/1`` document;
* :mod:`~cardbench.geometry.run` -- :func:`find_geometry`, the whole pass on one device.
"""

from cardbench.geometry.doc import SCHEMA
from cardbench.geometry.run import GeometryOptions, find_geometry

__all__ = ["SCHEMA", "GeometryOptions", "find_geometry"]
