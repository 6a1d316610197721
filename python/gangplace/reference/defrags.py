"""The oracle's defragmentation operations (docs/preemption.md D1-D5).

A mixin of :class:`gangplace.reference.Cluster`, built on the pure rules of
:mod:`gangplace.reference.moves`.
"""

from __future__ import annotations

from collections.abc import Iterable

from gangplace.reference import moves, texts
from gangplace.reference.planning import is_roles
from gangplace.reference.removals import (
    Removals,
    _limits,
    _refuse_unsupported_roles,
    _refuse_unsupported_shapes,
)
from gangplace.reference.values import (
    AnyRequest,
    DefragPlan,
    Move,
    Reservation,
)

__all__ = ["Defrags"]


class Defrags(Removals):
    """Mixin: `plan_defrag` and `apply_defrag`, beside the preemption of :class:`Removals`."""

    def _healthy_shares(self) -> dict[str, dict[int, int]]:
        """Per node, the thousandths used on each healthy shared GPU (D5's movers)."""
        return {
            name: {gpu: used for gpu, used in node.shares.items() if gpu not in node.unhealthy}
            for name, node in self._nodes.items()
            if node.shares
        }

    def plan_defrag(
        self,
        request: AnyRequest,
        *,
        max_moves: int | None = 16,
        allow_downgrade: bool = False,
        evict_unplaceable: bool = False,
        min_runtime: float = 0.0,
        exempt_owners: Iterable[str] = (),
    ) -> DefragPlan | None:
        """Which movable jobs to move where so that the gang fits (rules D1-D4)."""
        most, min_runtime, exempt = _limits(max_moves, min_runtime, exempt_owners, "max_moves")
        if not is_roles(request):
            _refuse_unsupported_shapes(request, "plan_defrag")
        else:
            _refuse_unsupported_roles(request, "plan_defrag")
        now = self._reclaim()
        placement = self._plan(request)
        if placement is not None:
            return DefragPlan(request, placement, (), (), 0)
        candidates = self._candidates(request, "defrag", min_runtime, exempt, now)
        movers = {}
        for candidate in candidates:
            hold = self._holds[candidate.id]
            asked = hold.request
            movable = asked is not None and not getattr(asked, "spares", 0)  # docs/repair.md
            gang = self._gang(asked) if movable else None  # type: ignore[arg-type]
            evictable = hold.preemptible and hold.priority < request.priority
            movers[candidate.id] = moves.Mover(
                candidate, gang, len(hold.placement.pods), hold.placement.level, evictable
            )
        options = (self.policy, allow_downgrade, evict_unplaceable, most)
        if is_roles(request):
            unit = self._roles(request)
            found = moves.defrag_choices_roles(
                self._roles_views(unit), self.levels, unit, candidates, movers, *options,
                shares=self._healthy_shares(),  # D5: fractional movers
            )  # fmt: skip
        else:
            gang = self._gang(request)
            views = self._views(self._asks(request))
            found = moves.defrag_choices(
                views, self.levels, gang, candidates, movers, *options,
                gang_nodes=self._views(self._asks(request), gang.gpu_milli),  # D5: shares
                shares=self._healthy_shares(),  # D5: fractional movers
            )  # fmt: skip
        if found is None:
            return None
        _, placement, targets, evictions = found
        steps = tuple(
            Move(hid, self._holds[hid].placement, target) for hid, target in sorted(targets)
        )
        moved = sum(movers[hid].candidate.held for hid, _ in targets)  # whole GPUs
        return DefragPlan(request, placement, steps, tuple(sorted(evictions)), moved)

    def apply_defrag(
        self, plan: DefragPlan, *, ttl: float = 300.0, owner: str | None = None
    ) -> tuple[Reservation, dict[str, Reservation]]:
        """Moves and evicts atomically after re-validating, or raises ``Conflict``."""
        now = self._check_call(ttl, owner)
        request = plan.request
        for step in plan.moves:
            hold = self._holds.get(step.allocation)
            if hold is None or hold.placement != step.source or hold.ended:
                raise texts.mover_changed(step.allocation)
        moved = [step.allocation for step in plan.moves]
        freed, returned = self._check_victims(
            moved, lambda h: h.movable and h.priority <= request.priority and not h.asks
        )
        more, returned_more = self._check_victims(
            plan.evictions, lambda h: h.preemptible and h.priority < request.priority
        )
        for name, gpus in more.items():
            freed.setdefault(name, set()).update(gpus)
        for who, count in returned_more.items():
            returned[who] = returned.get(who, 0) + count
        # The movers' and evicted jobs' shares are given back; a GPU whose shares all are is
        # free (D5).
        back = self._given_back([*moved, *plan.evictions])
        self._freed_whole(freed, back)
        # Movers ask no resources: the gang's must be free now.
        self._check_target_resources(request, plan.placement, plan.evictions)
        taken: dict[str, set[int]] = {}
        targets: list[dict[str, set[int]]] = []
        milli = plan.placement.gpu_milli
        shared: dict[str, set[int]] = {}  # GPUs fractional moves share (never taken whole)
        earlier: dict[tuple[str, int], int] = {}  # the shares earlier moves take
        for target in [plan.placement, *(step.target for step in plan.moves)]:
            if target is plan.placement and milli is not None:  # D5: the gang's shares
                self._check_shares(target, milli, freed, back)  # type: ignore[attr-defined]
                for pod in target.pods:  # no move may take a GPU the gang shares
                    taken.setdefault(pod.node, set()).update(pod.gpus)
                targets.append({})
                continue
            if target.gpu_milli is not None:  # D5: a fractional mover's shares
                self._check_shares(  # type: ignore[attr-defined]
                    target, target.gpu_milli, freed, back, earlier
                )
                for pod in target.pods:
                    if taken.get(pod.node, set()) & set(pod.gpus):
                        raise texts.targets_overlap()
                    shared.setdefault(pod.node, set()).update(pod.gpus)
                targets.append({})
                continue
            held = self._check_target(target, freed)
            for name, gpus in held.items():
                if (taken.get(name, set()) | shared.get(name, set())) & gpus:
                    raise texts.targets_overlap()
                taken.setdefault(name, set()).update(gpus)
            targets.append(held)
        gang = targets[0]
        self._check_cap_after(owner, sum(len(g) for g in gang.values()), returned.get(owner, 0))
        old = {hid: self._holds[hid] for hid in moved}
        for hid in moved:
            self._end(hid, "migrated")
        for hid in plan.evictions:
            self._end(hid, "preempted")
        terms = (request.priority, request.preemptible, request.movable)
        reservation = self._hold_new(plan.placement, gang, now, ttl, owner, terms, request)
        replaced = {}
        for step, held in zip(plan.moves, targets[1:], strict=True):
            was = old[step.allocation]
            terms = (was.priority, was.preemptible, was.movable)
            replaced[step.allocation] = self._hold_new(
                step.target, held, now, ttl, was.owner, terms, was.request
            )
        return reservation, replaced
