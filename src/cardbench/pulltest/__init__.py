"""Does a card keep what it acknowledged? A pull test (issue 32; diskchecker.pl without a second
machine: the host keeps the log while only the card loses power).

:func:`run_pulltest` writes numbered, self-describing records (:mod:`cardbench.pulltest.layout`)
to a whole device, small (4 KiB, scattered) and large (1 MiB, sequential), each logged on the
host before it is submitted and after write + fdatasync returned (:mod:`cardbench.pulltest.hostlog`);
the card is pulled (by a person, after ``after`` seconds, or by a power switch), found again by
the UUID on it on any device name, read back and judged per record (:mod:`cardbench.pulltest.doc`):
acknowledged and intact / lost / torn, in flight, old data damaged. :func:`resume_pulltest`
verifies later from the kept log. The result is a ``cardbench.pulltest/1`` document.
"""

from cardbench.pulltest.core import MIXES, PowerSwitch, PullOptions, kernel_facts, resume_pulltest, run_pulltest
from cardbench.pulltest.doc import SCHEMA, VERDICTS, answer
from cardbench.pulltest.hostlog import HostLogError, log_dir
from cardbench.pulltest.layout import Layout

__all__ = ["MIXES", "SCHEMA", "VERDICTS", "HostLogError", "Layout", "PowerSwitch", "PullOptions", "answer",
           "kernel_facts", "log_dir", "resume_pulltest", "run_pulltest"]
