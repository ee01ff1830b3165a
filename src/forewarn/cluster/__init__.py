"""Several front-ends serving one fleet from one PostgreSQL journal.

PostgreSQL is the coordination engine; there is no consensus of our own:

- the journal's order is the fleet's history, and each front-end's platform is a function
  of it (:class:`~forewarn.cluster.replica.Replica`);
- writers take turns under the namespace's ``pg_advisory_xact_lock`` and append at exactly
  the next sequence (:meth:`~forewarn.storage.postgres.PostgresJournal.exclusive`);
- one leader, holding a session-level ``pg_try_advisory_lock``, journals the passing of
  time when a deadline falls due (:func:`~forewarn.cluster.tasks.lead`);
- every front-end follows the others through LISTEN/NOTIFY and a periodic read
  (:func:`~forewarn.cluster.tasks.follow`), answering VMs from what it has applied.

``docs/scale-out.md`` ("How front-ends stay one fleet") gives the reasoning.
"""

from __future__ import annotations

from forewarn.cluster.replica import Replica, ReplicaError
from forewarn.cluster.tasks import follow, lead

__all__ = ["Replica", "ReplicaError", "follow", "lead"]
