"""Record kinds: every kind of record cardbench keeps, declared once, in one registry.

A measurement leaves a record: a run result (``cardbench.result/1``), a verify document
(``cardbench.verify/1``), a reader probe (``cardbench.probe/1``), a drawer session
(``cardbench.session/1``), a card's flash geometry (``cardbench.geometry/1``), an
endurance run (``cardbench.endurance/1``). Each is a :class:`Kind` registered by its own module here
(:mod:`~cardbench.kinds.result`, :mod:`~cardbench.kinds.verify`, :mod:`~cardbench.kinds.probe`,
:mod:`~cardbench.kinds.session`), the way engines register in :mod:`cardbench.engine.registry`.
Everything that handles records iterates over :func:`kinds` instead of naming them:

* the store (:mod:`cardbench.store.core`): ``save_record``, ``save_all``, ``records(kind, ...)``,
  ``stored_document``; the outbox (:mod:`cardbench.store.outbox`) and ``cardbench sync``;
* export and import (:mod:`cardbench.store.export`): one list per kind in ``cardbench.export/2``,
  each document checked by its kind's ``problem`` before anything is stored;
* sharing with a station server (:mod:`cardbench.share`), and the server, which stores what
  ``import`` reads and serves each kind at ``/api/v1/records/{kind}`` and ``.../{kind}/{id}``;
* ``cardbench results`` (``--json``: the export; the table: the runs, then one line per record
  of each ``listed`` kind).

To add a kind (say ``cardbench.scratch/1``; :mod:`~cardbench.kinds.endurance` is a real one):

1. Write ``src/cardbench/kinds/scratch.py``::

       from cardbench.kinds.registry import Kind, register
       from cardbench.kinds.shapes import common_problem, fields_problem, one_card

       SCHEMA = "cardbench.scratch/1"
       FIELDS = (("cycles", "number"), ("answer", "text"))

       def problem(doc):                      # None, or one line naming the field
           return common_problem(doc) or fields_problem(doc, FIELDS)

       def summary(doc):                      # the answer in words, one line
           return f"scratch: {doc.get('answer')} after {doc.get('cycles')} cycles"

       SCRATCH = register(Kind(name="scratch", schema=SCHEMA, section="scratch",
                               noun="scratch run", title="scratch run", problem=problem,
                               cards=one_card, summary=summary))

   A document is a dict with ``schema``, ``id``, ``created_at`` (ISO 8601), and, for
   :func:`~cardbench.kinds.shapes.one_card`, the ``card`` and ``reader`` as a result has them
   (``Card.to_dict()``, ``Reader.to_dict()``); anything else is the kind's own.
2. Import it below, beside the others (that registers it).
3. Make and keep its documents with :func:`cardbench.record.record` (store, else outbox; shared
   with ``--share``). That is all: it is stored in the shared ``records`` table (no migration),
   exported and imported in its own list (``"scratch": [...]``), sent to a station server,
   listed by ``cardbench results`` and served by ``cardbench serve``. A kind that needs columns
   to query gets its own table (a migration in :mod:`cardbench.store.schema`) and a
   :class:`Table` naming it.

tests/store/test_store_kinds.py declares a throwaway kind in the test alone and follows it
through all of these.
"""

from cardbench.kinds.registry import (
                                      RECORDS,
                                      Kind,
                                      Link,
                                      Table,
                                      count_items,
                                      describe,
                                      document_of,
                                      kind_for_schema,
                                      kind_named,
                                      kind_names,
                                      kind_of,
                                      kinds,
                                      register,
                                      unregister,
)

# the built-in kinds register themselves, in this order (the registry above never imports them)
from cardbench.kinds import result as _result, verify as _verify, probe as _probe, session as _session  # noqa: E402,F401,I001  isort: skip
from cardbench.kinds import pulltest as _pulltest  # noqa: E402,F401,I001  isort: skip
from cardbench.kinds import geometry as _geometry  # noqa: E402,F401,I001  isort: skip
from cardbench.kinds import endurance as _endurance  # noqa: E402,F401,I001  isort: skip

RESULT, VERIFY, PROBE, SESSION = _result.RESULT, _verify.VERIFY, _probe.PROBE, _session.SESSION
PULLTEST = _pulltest.PULLTEST
GEOMETRY, GEOMETRY_SCHEMA = _geometry.GEOMETRY, _geometry.SCHEMA
ENDURANCE, ENDURANCE_SCHEMA = _endurance.ENDURANCE, _endurance.SCHEMA
RESULT_SCHEMA, VERIFY_SCHEMA, PROBE_SCHEMA, SESSION_SCHEMA = (RESULT.schema, VERIFY.schema, PROBE.schema,
                                                              SESSION.schema)

__all__ = ["Kind", "Link", "Table", "RECORDS", "register", "unregister", "kinds", "kind_names", "kind_named",
           "kind_for_schema", "kind_of", "document_of", "describe", "count_items", "RESULT", "VERIFY", "PROBE",
           "SESSION", "PULLTEST", "RESULT_SCHEMA", "VERIFY_SCHEMA", "PROBE_SCHEMA", "SESSION_SCHEMA", "GEOMETRY",
           "GEOMETRY_SCHEMA", "ENDURANCE", "ENDURANCE_SCHEMA"]
