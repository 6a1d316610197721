"""Changing queues and cohorts while jobs run (docs/queues.md, Q11).

A mixin of :class:`~gangplace.scheduler.Scheduler`: each call builds the whole new tree
from the current values with one change, checks it as the Scheduler's constructor does, and
only then puts it in place, keeping every running job's usage. A quota lowered below its
queue's usage evicts nothing: the queue admits nothing new until its usage fits (its jobs
wait with the quota's reason), and it counts as borrowing for reclaims meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gangplace.errors import InvalidRequest
from gangplace.scheduler.quota import Cohort, Queue

if TYPE_CHECKING:
    from gangplace.scheduler.tenancy import Tenancy
    from gangplace.scheduler.waiting import Waiting

__all__ = ["LiveQueues"]


class LiveQueues:
    """The Scheduler's calls that change its queues and cohorts (Q11)."""

    _tenancy: Tenancy | None
    _waiting: Waiting

    if TYPE_CHECKING:  # the Scheduler's

        def _freeze_reasons(self) -> None: ...

    def add_queue(self, queue: Queue) -> None:
        """Adds a queue (its name new among queues and cohorts).

        Raises:
            InvalidRequest: No queues on this Scheduler, a name in use, or a tree the
                constructor would refuse; nothing changed.
            TypeError: Not a ``Queue``.

        """
        tenancy = self._tree_of("add_queue")
        _of_type(queue, Queue)
        queues = [*tenancy.tree.queues.values(), queue]
        self._rebuild(queues, list(tenancy.tree.cohorts.values()))

    def update_queue(self, queue: Queue) -> None:
        """Replaces the queue of ``queue.name`` (its nominal, limits, weight, policies...).

        Running jobs keep running; a nominal lowered below the queue's usage admits nothing
        new to the queue until its usage fits.

        Raises:
            InvalidRequest: No queues on this Scheduler, an unknown queue, or a tree the
                constructor would refuse (an unknown cohort...); nothing changed.
            TypeError: Not a ``Queue``.

        """
        tenancy = self._tree_of("update_queue")
        _of_type(queue, Queue)
        if queue.name not in tenancy.tree.queues:
            raise InvalidRequest(f"unknown queue {queue.name!r}")
        queues = [queue if q.name == queue.name else q for q in tenancy.tree.queues.values()]
        self._rebuild(queues, list(tenancy.tree.cohorts.values()))

    def remove_queue(self, name: str) -> None:
        """Removes a queue that no job waits or runs in.

        Chosen: a queue with jobs is not removed (cancel or finish them first), so no job
        is left without a quota.

        Raises:
            InvalidRequest: No queues on this Scheduler, an unknown queue, a queue with
                jobs, or the last queue; nothing changed.

        """
        tenancy = self._tree_of("remove_queue")
        if name not in tenancy.tree.queues:
            raise InvalidRequest(f"unknown queue {name!r}")
        queues = [q for q in tenancy.tree.queues.values() if q.name != name]
        self._rebuild(queues, list(tenancy.tree.cohorts.values()))

    def add_cohort(self, cohort: Cohort) -> None:
        """Adds a cohort (its name new among queues and cohorts).

        Raises:
            InvalidRequest: No queues on this Scheduler, a name in use, or a tree the
                constructor would refuse; nothing changed.
            TypeError: Not a ``Cohort``.

        """
        tenancy = self._tree_of("add_cohort")
        _of_type(cohort, Cohort)
        cohorts = [*tenancy.tree.cohorts.values(), cohort]
        self._rebuild(list(tenancy.tree.queues.values()), cohorts)

    def update_cohort(self, cohort: Cohort) -> None:
        """Replaces the cohort of ``cohort.name`` (its nominal, limits, weight, parent).

        Raises:
            InvalidRequest: No queues on this Scheduler, an unknown cohort, or a tree the
                constructor would refuse (a cycle of parents...); nothing changed.
            TypeError: Not a ``Cohort``.

        """
        tenancy = self._tree_of("update_cohort")
        _of_type(cohort, Cohort)
        if cohort.name not in tenancy.tree.cohorts:
            raise InvalidRequest(f"unknown cohort {cohort.name!r}")
        cohorts = [cohort if c.name == cohort.name else c for c in tenancy.tree.cohorts.values()]
        self._rebuild(list(tenancy.tree.queues.values()), cohorts)

    def remove_cohort(self, name: str) -> None:
        """Removes a cohort that no queue or cohort names as its parent.

        Raises:
            InvalidRequest: No queues on this Scheduler, an unknown cohort, or one still
                named by a queue or cohort; nothing changed.

        """
        tenancy = self._tree_of("remove_cohort")
        if name not in tenancy.tree.cohorts:
            raise InvalidRequest(f"unknown cohort {name!r}")
        cohorts = [c for c in tenancy.tree.cohorts.values() if c.name != name]
        self._rebuild(list(tenancy.tree.queues.values()), cohorts)

    def _tree_of(self, call: str) -> Tenancy:
        if self._tenancy is None:
            raise InvalidRequest(f"{call}: this scheduler has no queues")
        return self._tenancy

    def _rebuild(self, queues: list[Queue], cohorts: list[Cohort]) -> None:
        assert self._tenancy is not None
        self._freeze_reasons()  # S12: the last cycle's reasons, as the queues were then
        pending = {job.queue for job in self._waiting.queue.by_id.values() if job.queue}
        self._tenancy.rebuilt(queues, cohorts, pending)


def _of_type(value: object, kind: type) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"expected a {kind.__name__}, not {type(value).__name__}")
