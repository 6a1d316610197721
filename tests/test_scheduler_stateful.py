"""A state machine over gangplace.Scheduler: invariants after every step, and EASY backfill's
promise checked by brute force on a copy of the cluster.

The promise (README, rule S5): jobs backfilled ahead of a blocked head never delay the
head's earliest start as the running jobs' walltimes predict it. After every cycle the test
replays the predicted ends on a restored copy of the cluster twice, with and without the
jobs that cycle backfilled, and finds the first end at which the head fits: both must agree.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gangplace import Cluster, GangRequest, Scheduler, Unschedulable

LEVELS = ("rack",)


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.cluster = Cluster(LEVELS, clock=lambda: self.now)
        for index in range(6):
            self.cluster.add_node(f"n{index}", gpus=4, topology={"rack": f"r{index // 3}"})
        self.quotas = {"a": 12}
        self.scheduler = Scheduler(self.cluster, clock=lambda: self.now, quotas=self.quotas)
        self.submitted = 0
        self.walltimes: dict[str, float | None] = {}

    @rule(
        pods=st.integers(1, 4),
        gpus=st.sampled_from([1, 2, 4]),
        level=st.sampled_from([None, "rack", "node"]),
        walltime=st.sampled_from([None, 3.0, 5.0, 20.0, 60.0, 200.0]),
        owner=st.sampled_from([None, "a"]),
        elastic=st.booleans(),
    )
    def submit(
        self,
        pods: int,
        gpus: int,
        level: str | None,
        walltime: float | None,
        owner: str | None,
        elastic: bool,
    ) -> None:
        job_id = f"j{self.submitted}"
        self.submitted += 1
        request = GangRequest(pods, gpus, required_level=level, min_pods=1 if elastic else None)
        try:
            self.scheduler.submit(job_id, request, owner=owner, walltime=walltime)
        except Unschedulable:
            return
        self.walltimes[job_id] = walltime

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
        before = self.cluster.snapshot()
        decisions = self.scheduler.cycle(self.now)
        backfilled = [s for s in decisions.started if s.backfilled]
        if backfilled:
            self._check_no_delay(before, decisions)

    def _check_no_delay(self, before: bytes, decisions: Any) -> None:
        if decisions.head is None:
            return
        head = next(job for job in self.scheduler.pending() if job.job_id == decisions.head)
        backfilled = {s.job_id for s in decisions.started if s.backfilled}
        with_them = self._earliest_start(head, set())
        without = self._earliest_start(head, backfilled)
        assert with_them == without, (head, backfilled, with_them, without)
        event("backfill checked against the head's earliest start")
        if math.isfinite(without):
            event("... with a finite earliest start")

    def _earliest_start(self, head: Any, released_now: set[str]) -> float:
        """When the head can start as the walltimes predict: placement and quota both."""
        copy = Cluster.restore(self.cluster.snapshot(), clock=lambda: self.now)
        quota = self.quotas.get(head.owner) if head.owner is not None else None
        request = head.request
        fewest = (request.min_pods or request.pods) * request.gpus_per_pod
        used = 0
        ends: list[tuple[float, str, str | None, int]] = []
        for job in self.scheduler.running():
            gpus = job.allocation.placement.total_gpus
            if job.job_id in released_now:
                copy.release(job.allocation.id, owner=job.owner)
                continue
            used += gpus if job.owner == head.owner else 0
            end = math.inf if job.walltime is None else job.started_at + job.walltime
            ends.append((max(end, self.now), job.allocation.id, job.owner, gpus))

        def can_start() -> bool:
            room = quota is None or used + fewest <= quota
            return room and copy.place_gang(request) is not None

        if can_start():
            return self.now
        for end, allocation, owner, gpus in sorted(ends):
            if math.isinf(end):
                break
            copy.release(allocation, owner=owner)
            used -= gpus if owner == head.owner else 0
            if can_start():
                return end
        return math.inf

    @invariant()
    def quotas_hold_and_holds_match(self) -> None:
        running = self.scheduler.running()
        used = sum(j.allocation.placement.total_gpus for j in running if j.owner == "a")
        assert used <= self.quotas["a"]
        held = {a.id for a in self.cluster.allocations()} | {
            a.id for a in self.cluster.allocations(owner="a")
        }
        assert {j.allocation.id for j in running} == held
        pending = {j.job_id for j in self.scheduler.pending()}
        assert not pending & {j.job_id for j in running}
        assert len(self.scheduler) == len(pending) + len(running)
        self.cluster.check_invariants()


TestSchedulerMachine = SchedulerMachine.TestCase
TestSchedulerMachine.settings = settings(max_examples=600, stateful_step_count=50)
