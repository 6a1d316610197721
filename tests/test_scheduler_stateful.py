"""A state machine over gangplace.Scheduler: invariants after every step, and the backfill's
promise checked by brute force on a copy of the cluster.

The promise (docs/scheduler.md, rule S5), for EASY and conservative backfill alike: no job that
started delays a reservation past its time, as the running jobs' walltimes predict. After every
cycle the test releases, on a restored copy of the cluster, every running job predicted to
end by a reservation's time: every GPU of the reservation must then be free, and its owner's
quota must have room for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from gangplace import Cluster, GangRequest, InvalidRequest, Scheduler, Unschedulable

LEVELS = ("rack",)

# Bad submits: (job id, request, keyword arguments) from a fresh job id.
BAD_SUBMITS: dict[str, Callable[[str], tuple[Any, Any, dict[str, Any]]]] = {
    "owner-empty": lambda job: (job, GangRequest(1, 1), {"owner": ""}),
    "owner-long": lambda job: (job, GangRequest(1, 1), {"owner": "o" * 254}),
    "owner-multibyte": lambda job: (job, GangRequest(1, 1), {"owner": "é" * 127}),
    "owner-surrogate": lambda job: (job, GangRequest(1, 1), {"owner": "a\ud800"}),
    "owner-type": lambda job: (job, GangRequest(1, 1), {"owner": 7}),
    "id-empty": lambda job: ("", GangRequest(1, 1), {}),
    "id-long": lambda job: ("j" * 254, GangRequest(1, 1), {}),
    "id-type": lambda job: (7, GangRequest(1, 1), {}),
    "request-type": lambda job: (job, (1, 1), {}),
    "walltime": lambda job: (job, GangRequest(1, 1), {"walltime": -1.0}),
    "walltime-nan": lambda job: (job, GangRequest(1, 1), {"walltime": math.nan}),
    "timeout": lambda job: (job, GangRequest(1, 1), {"timeout": math.inf}),
    "ladder-level": lambda job: (job, GangRequest(1, 1), {"ladder": [(1.0, "spine")]}),
    "ladder-shape": lambda job: (job, GangRequest(1, 1), {"ladder": [(1.0,)]}),
}


class SchedulerMachine(RuleBasedStateMachine):
    QUOTAS: ClassVar[tuple[tuple[str, int], ...]] = (("a", 12),)

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.cluster = Cluster(LEVELS, clock=lambda: self.now)
        self.cluster.seed_ids(0)  # preemption breaks its last ties by id: replays must agree
        for index in range(6):
            self.cluster.add_node(f"n{index}", gpus=4, topology={"rack": f"r{index // 3}"})
        self.quotas = dict(self.QUOTAS)
        self.scheduler = Scheduler(self.cluster, clock=lambda: self.now, quotas=self.quotas)
        self.submitted = 0
        self.walltimes: dict[str, float | None] = {}
        self.backfill = "easy"
        self.kept: tuple[Any, dict[str, str]] | None = None  # the last cycle, reasons unread

    @initialize(
        backfill=st.sampled_from(["easy", "conservative"]),
        depth=st.sampled_from([1, 2, 16]),
        preemption=st.booleans(),
        grace=st.sampled_from([0.0, 0.0, 10.0]),
    )
    def choose_backfill(self, backfill: str, depth: int, preemption: bool, grace: float) -> None:
        """EASY, or conservative backfill with a reservation depth (docs/scheduler.md S5);
        maybe preemption (S7), its victims' pods ending over a grace (S17)."""
        self.backfill = backfill
        self.scheduler = Scheduler(
            self.cluster,
            clock=lambda: self.now,
            quotas=self.quotas,
            backfill=backfill,  # type: ignore[arg-type]
            reservation_depth=depth,
            preemption=preemption,
            eviction_grace=grace,
        )

    def _starting(self) -> list[Any]:
        """S17: the jobs holding GPUs until their victims' pods have ended (not running())."""
        running = self.scheduler._running
        return [running.jobs[job_id] for job_id in running.eviction_grace.starting]

    def _held_by_starting(self) -> list[Any]:
        """S17: (allocation, owner, predicted end) of each starting job."""
        running = self.scheduler._running
        return [
            (running.allocations[job.job_id], job.owner, job.runs_until) for job in self._starting()
        ]

    @rule(
        pods=st.integers(1, 4),
        gpus=st.sampled_from([1, 2, 4]),
        level=st.sampled_from([None, "rack", "node"]),
        walltime=st.sampled_from([None, 3.0, 5.0, 20.0, 60.0, 200.0]),
        owner=st.sampled_from([None, "a"]),
        elastic=st.booleans(),
        on_failure=st.sampled_from(["requeue", "repair", "fail"]),
        priority=st.sampled_from([0, 0, 1, 2]),
    )
    def submit(
        self,
        pods: int,
        gpus: int,
        level: str | None,
        walltime: float | None,
        owner: str | None,
        elastic: bool,
        on_failure: str,
        priority: int,
    ) -> None:
        job_id = f"j{self.submitted}"
        self.submitted += 1
        request = GangRequest(
            pods, gpus, required_level=level, min_pods=1 if elastic else None, priority=priority
        )
        try:
            self.scheduler.submit(
                job_id, request, owner=owner, walltime=walltime, on_failure=on_failure
            )
        except Unschedulable:
            return
        self.walltimes[job_id] = walltime

    @rule(kind=st.sampled_from(sorted(BAD_SUBMITS)))
    def submit_bad(self, kind: str) -> None:
        """A bad argument raises a typed error at submit and queues nothing (issue 25): the
        ``cycle`` rule after it would raise if it had been queued."""
        job_id, request, arguments = BAD_SUBMITS[kind](f"bad{self.submitted}")
        self.submitted += 1
        pending = [job.job_id for job in self.scheduler.pending()]
        try:
            self.scheduler.submit(job_id, request, **arguments)
        except (InvalidRequest, TypeError):
            event(f"submit refused: {kind}")
        else:
            raise AssertionError(f"submit accepted a bad {kind}")
        assert [job.job_id for job in self.scheduler.pending()] == pending

    @precondition(lambda self: len(self.scheduler) > 0)
    @rule(data=st.data())
    def cancel(self, data: Any) -> None:
        """Cancels a pending or a running job (issue 25: cycles go on after any of these)."""
        jobs = [job.job_id for job in self.scheduler.pending()]
        jobs += [job.job_id for job in self.scheduler.running()]
        job_id = data.draw(st.sampled_from(sorted(jobs)))
        holding = {job.job_id for job in self.scheduler.running()}
        holding |= {job.job_id for job in self._starting()}  # S17: holds its GPUs already
        assert self.scheduler.cancel(job_id) == (job_id in holding)  # True: GPUs released
        assert job_id not in {job.job_id for job in self.scheduler.pending()}
        assert job_id not in {job.job_id for job in self.scheduler.running()}

    @precondition(lambda self: bool(self.scheduler.running()))
    @rule(data=st.data())
    def requeue(self, data: Any) -> None:
        """Ends a running job and queues it again."""
        job = data.draw(st.sampled_from(self.scheduler.running()))
        self.scheduler.requeue(job.job_id, self.now)
        assert job.job_id in {pending.job_id for pending in self.scheduler.pending()}

    @rule(node=st.integers(0, 5), gpu=st.integers(0, 3), healthy=st.booleans())
    def gpu_health(self, node: int, gpu: int, healthy: bool) -> None:
        """A GPU fails or recovers, also under a running job (its allocation keeps it)."""
        self.cluster.set_gpu_health(f"n{node}", gpu, healthy)
        event("gpu " + ("recovers" if healthy else "fails"))

    @precondition(lambda self: bool(self.scheduler.running()))
    @rule(data=st.data())
    def finish(self, data: Any) -> None:
        running = self.scheduler.running()
        job = data.draw(st.sampled_from(running))
        self.scheduler.finish(job.job_id)

    @rule(step=st.sampled_from([0.0, 1.0, 5.0, 20.0]))
    def cycle(self, step: float) -> None:
        self.now += step
        for job in self.scheduler.running():  # jobs end at their walltime, as in the simulator
            if job.walltime is not None and job.started_at + job.walltime <= self.now:
                self.scheduler.finish(job.job_id)
        decisions = self.scheduler.cycle(self.now)
        if decisions.preempted:
            grace = self.scheduler._running.eviction_grace.seconds
            event("preempted" + (" (eviction grace)" if grace else ""))
        for started in decisions.started:
            if started.preempted and self.scheduler._running.eviction_grace.seconds:
                event("started once its victims' pods ended")
        self._check_reasons(decisions)
        self._check_failures_handled(decisions)
        self._check_reservations_hold()

    def _check_failures_handled(self, decisions: Any) -> None:
        """Rule S13: right after a cycle no running job has lost ranks; the jobs that had
        are repaired (running, nothing lost), requeued (pending or started again) or failed
        (gone, their history says so); rule S14: every job's history agrees with its state."""
        for job in self.scheduler.running():
            assert job.allocation.lost == (), job
        for repaired in decisions.repaired:
            kinds = [e.kind for e in self.scheduler.history(repaired.job_id).events]
            after = kinds[len(kinds) - 1 - kinds[::-1].index("repaired") + 1 :]
            # the walk may reclaim it (docs/queues.md Q5)
            if repaired.job_id in decisions.preempted:
                assert after[0] == "preempted", kinds
                event("job repaired, then preempted by the same cycle")
                continue
            assert self.scheduler.status(repaired.job_id) == "running"
            assert after == [], kinds
            event("failure repaired in place")
        for job_id in decisions.failed:
            assert self.scheduler.history(job_id).state == "failed"
            event("job failed on lost ranks")
        for job_id in decisions.requeued:
            event("job requeued on lost ranks")
            kinds = [e.kind for e in self.scheduler.history(job_id).events]
            assert "requeued" in kinds
        for waiting in self.scheduler.pending():
            assert self.scheduler.history(waiting.job_id).state == "pending"
        for job in self.scheduler.running():
            history = self.scheduler.history(job.job_id)
            assert history.state == "running" and history.starts >= 1
        reasons = dict(decisions.reasons)  # rule S12: one reason per job still queued
        assert set(reasons) == {job.job_id for job in self.scheduler.pending()}

    def _check_reasons(self, decisions: Any) -> None:
        """Rule S10: the cycle's blocked head says so (unless its quota is full now), and no
        job is left without a reason or as "not tried yet" right after a cycle. Rule S12:
        the previous cycle's ``Decisions.reasons``, kept unread through every change since,
        are what ``pending()`` said right after that cycle (sealed, not made again)."""
        if self.kept is not None:
            kept, said = self.kept
            assert dict(kept.reasons) == said
            event("a kept cycle's reasons read after later changes")
        pending = self.scheduler.pending()
        self.kept = (decisions, {job.job_id: job.reason for job in pending})
        for job in pending:
            assert job.reason and not job.reason.startswith("not tried yet"), job
            if job.job_id == decisions.head and not job.reason.startswith("owner "):
                assert job.reason.startswith("the blocked head"), job

    def _check_reservations_hold(self) -> None:
        """docs/scheduler.md S5, by brute force: every reservation of the last cycle can start at
        its time. On a copy of the cluster, every running job predicted to end by then is
        released: the reservation's GPUs must all be free and healthy, and its owner's
        quota must have room for it."""
        holders = [
            (
                job.allocation,
                job.owner,
                math.inf if job.walltime is None else job.started_at + job.walltime,
            )
            for job in self.scheduler.running()
        ] + self._held_by_starting()
        for job in self.scheduler.pending():
            shadow = job.shadow
            if shadow is None or shadow.placement is None:
                continue
            copy = Cluster.restore(self.cluster.snapshot(), clock=lambda: self.now)
            used = 0
            for allocation, owner, end in holders:
                if max(end, self.now) <= shadow.time:
                    copy.release(allocation.id, owner=owner)
                elif owner == job.owner:
                    used += allocation.placement.total_gpus
            for pod in shadow.placement.pods:
                if set(pod.gpus) & set(self.cluster.node(pod.node).shared):
                    event("a reservation waits for shared GPUs")
            if shadow.placement.gpu_milli is not None:  # room for its shares (F1)
                copy.reserve(shadow.placement)  # Conflict if any GPU lacks the room
                event("a reservation of shares checked")
            for pod in shadow.placement.pods if shadow.placement.gpu_milli is None else ():
                free = set(copy.node(pod.node).free)
                assert set(pod.gpus) <= free, (job, pod, free)
            quota = self.quotas.get(job.owner) if job.owner is not None else None
            if quota is not None:
                assert used + shadow.placement.total_gpus <= quota, (job, used)
            event(f"reservation checked ({self.backfill})")
        self._check_reservations_apart()

    def _check_reservations_apart(self) -> None:
        """S5: a reserved job holds its GPUs from its reservation's time for its walltime
        (for ever without one); two reservations that share a GPU never overlap in time."""
        grace = self.scheduler._running.run_grace()
        spans = []
        for job in self.scheduler.pending():
            shadow = job.shadow
            if shadow is None or shadow.placement is None:
                continue
            walltime = self.walltimes[job.job_id]
            end = math.inf if walltime is None else shadow.time + (walltime + grace)
            gpus = {(pod.node, gpu) for pod in shadow.placement.pods for gpu in pod.gpus}
            spans.append((shadow.time, end, gpus, job.job_id))
        for index, (start, end, gpus, job_id) in enumerate(spans):
            for other_start, other_end, other_gpus, other_id in spans[index + 1 :]:
                if gpus & other_gpus:
                    assert end <= other_start or other_end <= start, (job_id, other_id)
                    event("two reservations share GPUs, one after the other")

    @invariant()
    def quotas_hold_and_holds_match(self) -> None:
        running = self.scheduler.running()
        starting = self._held_by_starting()
        used = sum(j.allocation.placement.total_gpus for j in running if j.owner == "a")
        used += sum(a.placement.total_gpus for a, owner, _ in starting if owner == "a")
        assert used <= self.quotas.get("a", used)
        held = {a.id for a in self.cluster.allocations()} | {
            a.id for a in self.cluster.allocations(owner="a")
        }
        assert {j.allocation.id for j in running} | {a.id for a, _, _ in starting} == held
        pending = {j.job_id for j in self.scheduler.pending()}
        assert not pending & {j.job_id for j in running}
        assert len(self.scheduler) == len(pending) + len(running)
        self.cluster.check_invariants()


TestSchedulerMachine = SchedulerMachine.TestCase
TestSchedulerMachine.settings = settings(max_examples=600, stateful_step_count=50)


class SharesMachine(SchedulerMachine):
    """The same promises with jobs asking shares of a GPU beside whole-GPU ones (no quotas: a
    Scheduler with quotas refuses shares, docs/resources.md "Fractions of a GPU"): a whole-GPU
    reservation's GPUs are free once the jobs predicted to end by its time, shares included,
    have ended."""

    QUOTAS: ClassVar[tuple[tuple[str, int], ...]] = ()

    @rule(
        pods=st.integers(1, 6),
        milli=st.sampled_from([250, 500, 700]),
        level=st.sampled_from([None, "node"]),
        walltime=st.sampled_from([None, 3.0, 20.0, 200.0]),
        priority=st.sampled_from([0, 1, 3]),
    )
    def submit_shares(
        self, pods: int, milli: int, level: str | None, walltime: float | None, priority: int
    ) -> None:
        job_id = f"j{self.submitted}"
        self.submitted += 1
        request = GangRequest(pods, 1, gpu_milli=milli, required_level=level, priority=priority)
        try:
            self.scheduler.submit(job_id, request, walltime=walltime)
        except Unschedulable:
            return  # 5 or 6 pods of 700 on one node of 4 GPUs: never fits
        self.walltimes[job_id] = walltime
        event("shares submitted")


TestSharesMachine = SharesMachine.TestCase
TestSharesMachine.settings = settings(max_examples=600, stateful_step_count=50)


def test_a_bad_owner_is_refused_at_submit_and_the_queue_goes_on() -> None:
    """Issue 25's case: an empty owner used to be queued, then every cycle raised."""
    cluster = Cluster(LEVELS)
    for index in range(2):
        cluster.add_node(f"n{index}", gpus=8, topology={"rack": "r0"})
    scheduler = Scheduler(cluster, clock=lambda: 0.0)
    for owner in ("", "x" * 300):
        try:
            scheduler.submit("bad", GangRequest(1, 2), owner=owner)
        except InvalidRequest as error:
            assert "owner must be 1 to 253 bytes long" in str(error)
        else:
            raise AssertionError("accepted")
    scheduler.submit("good", GangRequest(1, 2), owner="team-a")
    started = scheduler.cycle(0.0).started
    assert [job.job_id for job in started] == ["good"]
