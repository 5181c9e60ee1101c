"""How long will a card last? The endurance test (issue 31): rounds of writing the whole card and
reading it all back, every 512-byte sector self-describing (:mod:`cardbench.endure.sectors`),
each bad sector classified, until a stop rule (:mod:`cardbench.endure.run`); the state saved on
the host after every slice (:mod:`cardbench.endure.state`), so a run of days survives a kill, a
reboot or a pulled card; the ``cardbench.endurance/1`` document (:mod:`cardbench.endure.doc`).
"""

from cardbench.endure.doc import ENDINGS, MILESTONES, SCHEMA, VERDICTS, answer, build_doc, round_line
from cardbench.endure.run import (
    EndureOptions,
    card_uuid_on,
    find_state,
    resume_endurance,
    run_endurance,
    saved_run_on,
)
from cardbench.endure.sectors import CLASSES, RoundSectors
from cardbench.endure.state import StateError, state_dir

__all__ = ["CLASSES", "ENDINGS", "MILESTONES", "SCHEMA", "VERDICTS", "EndureOptions", "RoundSectors", "StateError",
           "answer", "build_doc", "card_uuid_on", "find_state", "resume_endurance", "round_line", "run_endurance",
           "saved_run_on", "state_dir"]
