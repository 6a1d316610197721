"""Queues in the Scheduler: usage, quota checks and fair order (docs/queues.md).

:class:`Tenancy` is the Scheduler's record of its queues: the :class:`QuotaTree` with every
queue's usage, the running jobs of each queue, and the counters its metrics show. It answers
the walk's questions: how many GPUs a job's queue lets it take now (Q3-Q4), its queue's
weighted share (Q8, the order of the walk with fair sharing), which running jobs a blocked
job may preempt (Q6) in which order (Q7), and whether the job's quota would let it start
once given victims ended. :mod:`gangplace.scheduler.reclaim` makes the reclaim (Q5-Q7).
"""

from __future__ import annotations

from collections.abc import Iterable

from gangplace.errors import InvalidRequest
from gangplace.scheduler.queue import QueuedJob
from gangplace.scheduler.quota import Cohort, Queue, QuotaTree, Share, available_of

__all__ = ["FINAL_SHARE", "INITIAL_SHARE", "Tenancy", "checked_strategies"]

INITIAL_SHARE = "less_than_initial_share"
FINAL_SHARE = "less_than_or_equal_to_final_share"


def checked_strategies(strategies: Iterable[str]) -> tuple[str, ...]:
    """Kueue's fair-sharing preemption strategies, at least one, each known (Q7)."""
    if isinstance(strategies, str):
        raise TypeError("fair_sharing_strategies must be a sequence of names, not a str")
    found = tuple(strategies)
    if not found or any(s not in (INITIAL_SHARE, FINAL_SHARE) for s in found):
        raise InvalidRequest(
            f"fair_sharing_strategies must name {INITIAL_SHARE!r} and/or {FINAL_SHARE!r}, "
            f"got {found!r}"
        )
    return found


class Tenancy:
    """The queues of one Scheduler and their usage (mutable: the scheduler's own)."""

    def __init__(
        self,
        queues: Iterable[Queue],
        cohorts: Iterable[Cohort],
        fair_sharing: bool,
        strategies: Iterable[str] = ("less_than_initial_share",),
    ) -> None:
        self.tree = QuotaTree(queues, cohorts)
        if not self.tree.queues:
            raise InvalidRequest("queues must list at least one Queue")
        self.fair_sharing = bool(fair_sharing)
        self.strategies = checked_strategies(strategies)
        self.jobs: dict[str, dict[str, QueuedJob]] = {name: {} for name in self.tree.queues}
        self.gpus: dict[str, int] = {}  # running job -> GPUs counted against its queue
        self.failed_reclaims: set[str] = set()  # queues whose reclaim failed in this cycle
        self.started_now: set[str] = set()  # jobs started in this cycle: never victims (Q6)
        self.admitted: dict[str, int] = dict.fromkeys(self.tree.queues, 0)
        self.reclaimed: dict[str, int] = dict.fromkeys(self.tree.queues, 0)
        self.tree_starts: dict[str, int] = {}  # root cohort (or lone queue) -> its starts (Q8)
        self._derive()

    def _derive(self) -> None:
        """The views of the tree that the walk reads (made again when the tree changes)."""
        self.tree_queues: dict[str, list[str]] = {}  # root cohort -> its queues, in order
        for name in self.tree.queues:
            node = self.tree.nodes[name]
            if node.parent is not None:
                self.tree_queues.setdefault(node.root.name, []).append(name)
        # Queues whose jobs may preempt at all (Q6): the others never try a reclaim; those
        # that also queue best-effort are "quiet": meeting their first blocked job changes
        # nothing (the walk refuses their classes over quota before it starts).
        self.may_preempt = {
            name
            for name, queue in self.tree.queues.items()
            if queue.within_queue != "never"
            or (
                self.tree.nodes[name].parent is not None
                and (
                    queue.reclaim_within_cohort != "never" or queue.borrow_within_cohort != "never"
                )
            )
        }
        self.quiet = {
            name
            for name, queue in self.tree.queues.items()
            if name not in self.may_preempt and queue.queueing != "fifo"
        }

    def rebuilt(
        self, queues: Iterable[Queue], cohorts: Iterable[Cohort], pending: set[str]
    ) -> None:
        """Q11: the tree made again from new values, the running jobs' usage kept.

        ``pending``: the queues that jobs wait in. Raises (and changes nothing) when the new
        tree is invalid (as when the Scheduler is built) or when a queue that jobs wait or
        run in is gone.
        """
        tree = QuotaTree(queues, cohorts)
        if not tree.queues:
            raise InvalidRequest("queues must list at least one Queue")
        busy = {name for name, running in self.jobs.items() if running} | pending
        gone = sorted(busy - set(tree.queues))
        if gone:
            raise InvalidRequest(f"queue {gone[0]!r} has jobs: it cannot be removed")
        for name, running in self.jobs.items():
            for job_id in running:
                tree.add(name, self.gpus[job_id])
        self.tree = tree
        self.jobs = {name: self.jobs.get(name, {}) for name in tree.queues}
        self.admitted = {name: self.admitted.get(name, 0) for name in tree.queues}
        self.reclaimed = {name: self.reclaimed.get(name, 0) for name in tree.queues}
        self._derive()

    # ------------------------------------------------------------------ usage

    def checked_queue(self, queue: object) -> str:
        """The name a job is submitted to (``InvalidRequest``: missing or unknown)."""
        if queue is None:
            raise InvalidRequest("this scheduler has queues: submit(..., queue=...) names one")
        if not isinstance(queue, str):
            raise TypeError(f"queue must be a str, not {type(queue).__name__}")
        if queue not in self.tree.queues:
            raise InvalidRequest(f"unknown queue {queue!r}")
        return queue

    def started(self, job: QueuedJob, gpus: int) -> None:
        """A job of a queue started holding ``gpus``."""
        queue, job_id = job.queue or "", job.job_id
        self.tree.add(queue, gpus)
        self.jobs[queue][job_id] = job
        self.gpus[job_id] = gpus
        self.admitted[queue] += 1
        root = self.tree.nodes[queue].root.name
        self.tree_starts[root] = self.tree_starts.get(root, 0) + 1
        self.started_now.add(job_id)

    def ended(self, job: QueuedJob) -> None:
        """A running job of a queue ended (finished, cancelled, evicted, requeued)."""
        assert job.queue is not None
        self.tree.add(job.queue, -self.gpus.pop(job.job_id))
        del self.jobs[job.queue][job.job_id]

    def starts_seen(self, queue: str) -> int:
        """Q8: a count that moves whenever the queue's list of shares may have grown.

        A queue right under its root cohort (or without one) has one share, its own: its own
        starts. Deeper, a cohort's share moves with any start in its tree.
        """
        node = self.tree.nodes[queue]
        if node.parent is None or node.parent.parent is None:
            return self.admitted[queue]
        return self.tree_starts.get(node.root.name, 0)

    def room(self, job: QueuedJob) -> int:
        """docs/queues.md Q4: GPUs the job's queue lets it take now.

        A job that cannot be preempted never borrows: at most its queue's unused nominal.
        """
        node = self.tree.nodes[job.queue]  # type: ignore[index]
        room = available_of(node)
        if room < 0:
            room = 0
        if not job.request.preemptible:
            room = min(room, max(0, node.nominal - node.usage))
        return room

    def most(self, queue: str, preemptible: bool) -> int:
        """The most GPUs a job of ``queue`` could ever take (admission, S2)."""
        reachable = self.tree.reachable(queue)
        return reachable if preemptible else min(reachable, self.tree.nodes[queue].nominal)

    def reason(self, job: QueuedJob) -> str | None:
        """Why the job's queue keeps it waiting now, or ``None``."""
        room = self.room(job)
        if job.fewest_gpus <= room:
            return None
        assert job.queue is not None
        node = self.tree.nodes[job.queue]
        borrowing = "" if job.request.preemptible else "; it is not preemptible, so never borrows"
        return (
            f"queue {job.queue!r} lets it take {room} GPUs now, it needs {job.fewest_gpus} "
            f"(nominal {node.nominal}, in use {node.usage}{borrowing})"
        )

    # ------------------------------------------------------------------ reclaim

    def candidates(self, job: QueuedJob) -> tuple[list[QueuedJob], list[QueuedJob]]:
        """docs/queues.md Q6: the running jobs ``job`` may preempt: other queues', then its own.

        In no particular order (the engine sorts its candidates by id itself); ``ordered``
        sorts them as Q7 takes extra victims.
        """
        assert job.queue is not None
        tree, mine = self.tree, self.tree.queues[job.queue]
        node = tree.nodes[job.queue]
        priority = job.request.priority
        others: list[QueuedJob] = []
        if node.parent is not None:
            standing = self._standing(job)
            final = FINAL_SHARE in self.strategies  # a queue at ``after`` may still give
            after: tuple[Share, ...] | None = None
            for name in self.tree_queues[node.root.name]:
                running = self.jobs[name]
                if name == job.queue or not running:
                    continue
                policy, ceiling, fair = self._policy(job, name, standing)
                if policy is None:
                    continue  # Q6: not over its quota below the common cohort
                if fair:
                    after = after or tree.path_share(job.queue, job.fewest_gpus)
                    share = tree.path_share(name)
                    if share < after or (share == after and not final):
                        continue
                if policy == "never":
                    continue
                if policy == "any" and not self.started_now and ceiling is None:
                    others.extend(running.values())
                    continue
                others.extend(
                    other
                    for other in running.values()
                    if (policy == "any" or other.request.priority < priority)
                    and (ceiling is None or other.request.priority <= ceiling)
                    and other.job_id not in self.started_now
                )
        own: list[QueuedJob] = []
        if mine.within_queue != "never":
            newer = mine.within_queue == "lower_or_newer_equal_priority"
            own = [
                other
                for other in self.jobs[job.queue].values()
                if other.job_id not in self.started_now
                and (
                    other.request.priority < priority
                    or (newer and other.request.priority == priority and other.order > job.order)
                )
            ]
        return others, own

    def _standing(self, job: QueuedJob) -> tuple[bool, set[str]]:
        """Q6: whether the job fits its queue's nominal, and the cohorts whose quota it fits.

        A cohort above the queue fits the job when its usage, once the job runs, is within
        its subtree's quota.
        """
        assert job.queue is not None
        tree, node = self.tree, self.tree.nodes[job.queue]
        fits = node.usage + job.fewest_gpus <= node.nominal
        tree.add(job.queue, job.fewest_gpus)
        try:
            above = set()
            cohort = node.parent
            while cohort is not None:
                if cohort.usage <= cohort.subtree:
                    above.add(cohort.name)
                cohort = cohort.parent
        finally:
            tree.add(job.queue, -job.fewest_gpus)
        return fits, above

    def _policy(
        self, job: QueuedJob, other: str, standing: tuple[bool, set[str]]
    ) -> tuple[str | None, int | None, bool]:
        """Q6 for a queue of ``job``'s tree: ``(policy, priority ceiling, fair check)``.

        ``None`` for a queue not over its quota below their lowest common cohort (it, or a
        cohort between it and that cohort, within its quota: nothing of it is borrowed from
        ``job``'s side). The job has the advantage (its queue's ``reclaim_within_cohort``)
        when it fits its queue's nominal, or the quota of a cohort below the common one:
        the quota it reclaims is its side's own (Kueue's hierarchical reclaim). Otherwise it
        must borrow: ``borrow_within_cohort`` with its ceiling, or, with fair sharing,
        ``reclaim_within_cohort`` checked by shares.
        """
        assert job.queue is not None
        tree, mine = self.tree, self.tree.queues[job.queue]
        target = tree.nodes[other]
        common = tree.lca(job.queue, other)
        if common is None or target.usage <= target.nominal:
            return None, None, False
        if any(c.usage <= c.subtree for c in tree.between(other, common)):
            return None, None, False
        fits, above = standing
        if fits or any(c.name in above for c in tree.between(job.queue, common)):
            return mine.reclaim_within_cohort, None, False
        if self.fair_sharing:
            return mine.reclaim_within_cohort, None, True
        return mine.borrow_within_cohort, mine.borrow_within_cohort_max_priority, False

    def ordered(self, group: list[QueuedJob]) -> list[QueuedJob]:
        """Candidates in Q7's order.

        The queue furthest above its share first (with fair sharing), then lower priority,
        then the latest started, then job id.
        """
        return sorted(group, key=self._victim_order)

    def _victim_order(self, job: QueuedJob) -> tuple[object, ...]:
        assert job.queue is not None
        shares = self.tree.path_share(job.queue) if self.fair_sharing else ()
        above = tuple((-weighted, -raw) for weighted, raw in shares)
        return (above, job.request.priority, -(job.started_at or 0.0), job.job_id)

    def first_refused(self, job: QueuedJob, victims: Iterable[QueuedJob]) -> QueuedJob | None:
        """docs/queues.md Q7: the first victim not to take, re-checked victim by victim.

        The victims are taken one at a time, the next always the first in Q7's order at
        that moment (shares change as victims leave). A victim of another queue may be taken
        only while its queue, and every cohort between it and the common cohort, is over its
        quota at that moment (Q6), and, with fair sharing where the job has no advantage,
        only while a strategy lets its queue give it. ``None``: every victim may be taken.
        """
        assert job.queue is not None
        tree, queue = self.tree, job.queue
        standing = self._standing(job)
        left, taken = list(victims), []
        try:
            while left:
                victim = min(left, key=self._victim_order)
                other = victim.queue
                assert other is not None
                if other != queue:
                    policy, _, fair = self._policy(job, other, standing)
                    if policy is None:
                        return victim  # no longer over its quota: within its nominal
                    if fair and not self._fair(victim, queue, job):
                        return victim  # no strategy lets its queue give it
                tree.add(other, -self.gpus[victim.job_id])
                taken.append(victim)
                left.remove(victim)
            return None
        finally:
            for victim in taken:
                tree.add(victim.queue or "", self.gpus[victim.job_id])

    def _fair(self, victim: QueuedJob, queue: str, job: QueuedJob) -> bool:
        """Q7: whether a fair-sharing strategy lets ``victim``'s queue give it to ``job``."""
        tree, other = self.tree, victim.queue or ""
        mine = tree.path_share(queue, job.fewest_gpus)
        if INITIAL_SHARE in self.strategies and tree.path_share(other) > mine:
            return True
        return FINAL_SHARE in self.strategies and (
            tree.path_share(other, -self.gpus[victim.job_id]) >= mine
        )

    def quota_after(self, job: QueuedJob, gpus: int, victims: Iterable[QueuedJob]) -> bool:
        """Whether ``job`` may take ``gpus`` once ``victims`` have ended (Q3-Q4)."""
        victims = list(victims)
        for victim in victims:
            assert victim.queue is not None
            self.tree.add(victim.queue, -self.gpus[victim.job_id])
        try:
            return self.room(job) >= gpus
        finally:
            for victim in victims:
                assert victim.queue is not None
                self.tree.add(victim.queue, self.gpus[victim.job_id])
