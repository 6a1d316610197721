"""Queues and cohorts changed while jobs run, in the reference scheduler (docs/queues.md Q11).

A mixin of :class:`gangplace.reference.scheduler.ReferenceScheduler`: the tree is made
again from the new values (every quantity is recomputed from the running jobs anyway).
"""

from __future__ import annotations

from typing import Any

from gangplace.errors import InvalidRequest
from gangplace.reference.quota import ReferenceQuotas
from gangplace.scheduler.quota import Cohort, Queue

__all__ = ["ReferenceLive"]


class ReferenceLive:
    """Q11 for the reference scheduler."""

    tenancy: ReferenceQuotas | None
    pending: list[Any]
    running: list[Any]

    def add_queue(self, queue: Queue) -> None:
        """Q11: a new queue."""
        tree = self._tree()
        self._rebuild([*tree.queues.values(), queue], list(tree.cohorts.values()))

    def update_queue(self, queue: Queue) -> None:
        """Q11: a queue's new values."""
        tree = self._tree()
        if queue.name not in tree.queues:
            raise InvalidRequest(f"unknown queue {queue.name!r}")
        queues = [queue if q.name == queue.name else q for q in tree.queues.values()]
        self._rebuild(queues, list(tree.cohorts.values()))

    def remove_queue(self, name: str) -> None:
        """Q11: a queue without jobs goes."""
        tree = self._tree()
        if name not in tree.queues:
            raise InvalidRequest(f"unknown queue {name!r}")
        queues = [q for q in tree.queues.values() if q.name != name]
        self._rebuild(queues, list(tree.cohorts.values()))

    def add_cohort(self, cohort: Cohort) -> None:
        """Q11: a new cohort."""
        tree = self._tree()
        self._rebuild(list(tree.queues.values()), [*tree.cohorts.values(), cohort])

    def update_cohort(self, cohort: Cohort) -> None:
        """Q11: a cohort's new values."""
        tree = self._tree()
        if cohort.name not in tree.cohorts:
            raise InvalidRequest(f"unknown cohort {cohort.name!r}")
        cohorts = [cohort if c.name == cohort.name else c for c in tree.cohorts.values()]
        self._rebuild(list(tree.queues.values()), cohorts)

    def remove_cohort(self, name: str) -> None:
        """Q11: a cohort nobody names goes."""
        tree = self._tree()
        if name not in tree.cohorts:
            raise InvalidRequest(f"unknown cohort {name!r}")
        self._rebuild(
            list(tree.queues.values()), [c for c in tree.cohorts.values() if c.name != name]
        )

    def _tree(self) -> ReferenceQuotas:
        if self.tenancy is None:
            raise InvalidRequest("this scheduler has no queues")
        return self.tenancy

    def _rebuild(self, queues: list[Queue], cohorts: list[Cohort]) -> None:
        tree = ReferenceQuotas(queues, cohorts)  # checks names, parents and cycles
        busy = {job.queue for job in [*self.pending, *self.running]}
        for name in sorted(busy):
            if name not in tree.queues:
                raise InvalidRequest(f"queue {name!r} has jobs: it cannot be removed")
        self.tenancy = tree
