"""Queues and cohorts: the quota model of the Scheduler (docs/queues.md, Q1-Q4).

:class:`Queue` and :class:`Cohort` are frozen values, checked when built; :class:`QuotaTree`
checks how they hang together (names, parents, cycles) when the Scheduler is built, and
keeps each node's usage up to date as jobs start and end, so that what a queue may still
take (:meth:`QuotaTree.available`) costs the depth of the tree, not the number of jobs.

Quantities are GPUs. Each one is a mapping from resource name to amount (an int is read as
``{"gpu": n}``) so that counting more resources only adds keys; ``"gpu"`` is the only name
accepted so far.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal

from gangplace.errors import InvalidRequest
from gangplace.scheduler.arguments import checked_name

__all__ = ["MAX_QUANTITY", "RESOURCES", "Cohort", "Queue", "QuotaTree"]

RESOURCES = ("gpu",)
MAX_QUANTITY = 2**40  # GPUs: far beyond any cluster, small enough to stay exact in a float
WITHIN_QUEUE = ("never", "lower_priority", "lower_or_newer_equal_priority")
RECLAIM_WITHIN_COHORT = ("never", "lower_priority", "any")
BORROW_WITHIN_COHORT = ("never", "lower_priority")
QUEUEING = ("fifo", "best_effort_fifo")
MAX_WEIGHT = 1e6

Quantity = int | Mapping[str, int]


def _quantities(what: str, value: object, *, optional: bool) -> Mapping[str, int] | None:
    """``value`` as a read-only ``{resource: amount}`` (``None`` stays ``None`` if allowed)."""
    if value is None and optional:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int of GPUs or a mapping, not bool")
    if isinstance(value, int):
        value = {"gpu": value}
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be an int of GPUs or a mapping, not {type(value).__name__}")
    out: dict[str, int] = {}
    for name, amount in value.items():
        if name not in RESOURCES:
            raise InvalidRequest(
                f"{what}: unknown resource {name!r}; counted so far: {', '.join(RESOURCES)}"
            )
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise TypeError(f"{what}[{name!r}] must be an int")
        if not 0 <= amount <= MAX_QUANTITY:
            raise InvalidRequest(f"{what}[{name!r}] must be 0 to {MAX_QUANTITY}, got {amount}")
        out[name] = amount
    return MappingProxyType(out)


def _weight(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"weight must be a number, not {type(value).__name__}")
    if not (math.isfinite(value) and 0 <= value <= MAX_WEIGHT):
        raise InvalidRequest(f"weight must be finite, 0 to {MAX_WEIGHT:g}, got {value!r}")
    return float(value)


def _choice(what: str, value: object, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidRequest(f"{what} must be one of {', '.join(choices)}; got {value!r}")
    return value


def _gpus(quantities: Mapping[str, int] | None) -> int | None:
    return None if quantities is None else quantities.get("gpu", 0)


class _Frozen:
    """Frozen, compared and hashed by every field; ``repr`` shows them."""

    __slots__: tuple[str, ...] = ()
    _FIELDS: tuple[str, ...] = ()  # in the constructor's order, ``name`` first

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be set")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be deleted")

    def _fields(self) -> tuple[object, ...]:
        return tuple(_hashable(getattr(self, name)) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Frozen)
            and type(other) is type(self)
            and (self._fields() == other._fields())
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={_shown(getattr(self, name))}" for name in self._FIELDS)
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[object, ...]:
        name, *rest = self._FIELDS
        keywords = {field: _plain(getattr(self, field)) for field in rest}
        return (_rebuild, (type(self), getattr(self, name), keywords))


def _rebuild(kind: type[_Frozen], name: str, keywords: dict[str, object]) -> _Frozen:
    return kind(name, **keywords)  # type: ignore[call-arg]


def _hashable(value: object) -> object:
    return tuple(sorted(value.items())) if isinstance(value, Mapping) else value


def _plain(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else value


def _shown(value: object) -> str:
    return repr(dict(value)) if isinstance(value, Mapping) else repr(value)


class Cohort(_Frozen):
    """A pool that queues (and child cohorts) lend to and borrow from (docs/queues.md Q1).

    Args:
        name: Unique among queues and cohorts (1 to 253 bytes).
        parent: The cohort it belongs to (hierarchical cohorts), or ``None`` for a root.
        nominal: GPUs the cohort itself adds to its pool (beside what its members lend).
        borrowing_limit: The most it may take beyond its own subtree's quota from its
            parent (``None``: no limit). Only for a cohort with a parent.
        lending_limit: The most of its subtree's quota its parent may lend to others
            (``None``: all of it). Only for a cohort with a parent.
        weight: Its weight in fair sharing (0 to 1e6; 0: only what nobody else wants).

    Raises:
        InvalidRequest: An empty or too long name, a quantity that is negative, above
            2**40 or of an unknown resource, a weight out of range, or a limit on a root.
        TypeError: Wrong argument types.

    """

    _FIELDS = ("name", "parent", "nominal", "borrowing_limit", "lending_limit", "weight")
    __slots__ = _FIELDS
    name: str
    parent: str | None
    nominal: Mapping[str, int]
    borrowing_limit: Mapping[str, int] | None
    lending_limit: Mapping[str, int] | None
    weight: float

    def __init__(
        self,
        name: str,
        *,
        parent: str | None = None,
        nominal: Quantity = 0,
        borrowing_limit: Quantity | None = None,
        lending_limit: Quantity | None = None,
        weight: float = 1.0,
    ) -> None:
        _set(self, "name", checked_name("cohort name", name))
        _set(self, "parent", None if parent is None else checked_name("parent", parent))
        _set(self, "nominal", _quantities("nominal", nominal, optional=False))
        for what, limit in (("borrowing_limit", borrowing_limit), ("lending_limit", lending_limit)):
            _set(self, what, _quantities(what, limit, optional=True))
            if parent is None and limit is not None:
                raise InvalidRequest(f"cohort {name!r} has no parent: a {what} means nothing there")
        _set(self, "weight", _weight(weight))


class Queue(_Frozen):
    """A team's queue: its guaranteed GPUs, what it may borrow and lend (docs/queues.md Q1-Q9).

    Args:
        name: Unique among queues and cohorts (1 to 253 bytes); ``Scheduler.submit(queue=...)``
            names it.
        cohort: The cohort it lends to and borrows from; ``None``: it neither lends nor
            borrows.
        nominal: GPUs guaranteed to it: it gets them back from borrowers when it needs them.
        borrowing_limit: The most GPUs beyond ``nominal`` it may borrow (``None``: no limit).
        lending_limit: The most of its ``nominal`` others may borrow (``None``: all of it);
            at most ``nominal``.
        weight: Its weight in fair sharing (0 to 1e6; 0: only what nobody else wants).
        within_queue: Whom its jobs may preempt inside the queue: ``"never"``,
            ``"lower_priority"`` or ``"lower_or_newer_equal_priority"``.
        reclaim_within_cohort: Whom a job within its nominal quota may preempt in the
            queues of its cohort tree that borrow: ``"never"``, ``"lower_priority"``,
            ``"any"``.
        borrow_within_cohort: Whether a job that must borrow may preempt lower-priority jobs
            of other borrowing queues: ``"never"`` or ``"lower_priority"``.
        queueing: ``"best_effort_fifo"`` (default: a blocked job does not stop later jobs of
            the queue) or ``"fifo"`` (it does: nothing in the queue passes it).
        borrow_within_cohort_max_priority: With ``borrow_within_cohort="lower_priority"``,
            the highest priority a job that must borrow may preempt (Kueue's
            ``borrowWithinCohort.maxPriorityThreshold``); ``None``: any lower priority.

    Raises:
        InvalidRequest: A bad name, quantity, weight or policy; a limit without a cohort; a
            ``lending_limit`` above ``nominal``; a ``borrow_within_cohort_max_priority``
            without ``borrow_within_cohort="lower_priority"``, or outside the 32-bit range.
        TypeError: Wrong argument types.

    Example:
        >>> from gangplace import Queue
        >>> Queue("vision", cohort="research", nominal=16, borrowing_limit=8).nominal["gpu"]
        16

    """

    _FIELDS = (
        "name",
        "cohort",
        "nominal",
        "borrowing_limit",
        "lending_limit",
        "weight",
        "within_queue",
        "reclaim_within_cohort",
        "borrow_within_cohort",
        "queueing",
        "borrow_within_cohort_max_priority",
    )
    __slots__ = _FIELDS
    name: str
    cohort: str | None
    nominal: Mapping[str, int]
    borrowing_limit: Mapping[str, int] | None
    lending_limit: Mapping[str, int] | None
    weight: float
    within_queue: str
    reclaim_within_cohort: str
    borrow_within_cohort: str
    queueing: str
    borrow_within_cohort_max_priority: int | None

    def __init__(
        self,
        name: str,
        *,
        cohort: str | None = None,
        nominal: Quantity = 0,
        borrowing_limit: Quantity | None = None,
        lending_limit: Quantity | None = None,
        weight: float = 1.0,
        within_queue: Literal["never", "lower_priority", "lower_or_newer_equal_priority"] = "never",
        reclaim_within_cohort: Literal["never", "lower_priority", "any"] = "never",
        borrow_within_cohort: Literal["never", "lower_priority"] = "never",
        queueing: Literal["fifo", "best_effort_fifo"] = "best_effort_fifo",
        borrow_within_cohort_max_priority: int | None = None,
    ) -> None:
        _set(self, "name", checked_name("queue name", name))
        _set(self, "cohort", None if cohort is None else checked_name("cohort", cohort))
        _set(self, "nominal", _quantities("nominal", nominal, optional=False))
        for what, limit in (("borrowing_limit", borrowing_limit), ("lending_limit", lending_limit)):
            _set(self, what, _quantities(what, limit, optional=True))
            if cohort is None and limit is not None:
                raise InvalidRequest(f"queue {name!r} has no cohort: a {what} means nothing there")
        lending = _gpus(self.lending_limit)
        if lending is not None and lending > self.nominal["gpu"]:
            raise InvalidRequest(
                f"queue {name!r}: lending_limit {lending} is above nominal {self.nominal['gpu']}"
            )
        _set(self, "weight", _weight(weight))
        _set(self, "within_queue", _choice("within_queue", within_queue, WITHIN_QUEUE))
        _set(
            self,
            "reclaim_within_cohort",
            _choice("reclaim_within_cohort", reclaim_within_cohort, RECLAIM_WITHIN_COHORT),
        )
        _set(
            self,
            "borrow_within_cohort",
            _choice("borrow_within_cohort", borrow_within_cohort, BORROW_WITHIN_COHORT),
        )
        _set(self, "queueing", _choice("queueing", queueing, QUEUEING))
        threshold = borrow_within_cohort_max_priority
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, int):
                raise TypeError("borrow_within_cohort_max_priority must be an int")
            if not -(2**31) <= threshold < 2**31:
                raise InvalidRequest(
                    f"borrow_within_cohort_max_priority must be a 32-bit priority, got {threshold}"
                )
            if borrow_within_cohort != "lower_priority":
                raise InvalidRequest(
                    'borrow_within_cohort_max_priority needs borrow_within_cohort="lower_priority"'
                )
        _set(self, "borrow_within_cohort_max_priority", threshold)


def _set(value: object, name: str, field_value: object) -> None:
    object.__setattr__(value, name, field_value)


class _Node:
    """A queue or cohort in the tree, with its usage (mutable: the tree's own)."""

    __slots__ = (
        "borrowing_limit",
        "children",
        "guaranteed",
        "is_queue",
        "lending_limit",
        "name",
        "nominal",
        "parent",
        "root",
        "subtree",
        "usage",
        "weight",
    )

    def __init__(self, spec: Queue | Cohort) -> None:
        self.name = spec.name
        self.is_queue = isinstance(spec, Queue)
        self.nominal = spec.nominal["gpu"]
        self.borrowing_limit = _gpus(spec.borrowing_limit)
        self.lending_limit = _gpus(spec.lending_limit)
        self.weight = spec.weight
        self.parent: _Node | None = None
        self.root: _Node = self
        self.children: list[_Node] = []
        self.subtree = 0  # the quota of the node and what its children lend it
        self.guaranteed = 0  # the part of ``subtree`` it never lends
        self.usage = 0  # queue: GPUs of its jobs; cohort: its children's usage past guarantees


class QuotaTree:
    """Every queue and cohort, their quotas (docs/queues.md Q2) and their current usage.

    Raises:
        InvalidRequest: Two queues or two cohorts of one name, a name used by a queue and a
            cohort, an unknown cohort or parent, or a cycle of parents.
        TypeError: Something that is not a ``Queue`` (``queues``) or ``Cohort`` (``cohorts``).

    """

    def __init__(self, queues: Iterable[Queue], cohorts: Iterable[Cohort] = ()) -> None:
        queues, cohorts = list(queues), list(cohorts)
        for value in queues:
            if not isinstance(value, Queue):
                raise TypeError(f"queues must hold Queue values, not {value!r}")
        for cohort in cohorts:
            if not isinstance(cohort, Cohort):
                raise TypeError(f"cohorts must hold Cohort values, not {cohort!r}")
        self.queues: dict[str, Queue] = {}
        self.cohorts: dict[str, Cohort] = {}
        for name in [*(q.name for q in queues), *(c.name for c in cohorts)]:
            if name in self.queues or name in self.cohorts:
                raise InvalidRequest(f"the name {name!r} is used twice by queues and cohorts")
            self.queues.update((q.name, q) for q in queues if q.name == name)
            self.cohorts.update((c.name, c) for c in cohorts if c.name == name)
        self.nodes: dict[str, _Node] = {name: _Node(q) for name, q in self.queues.items()}
        self.nodes.update((name, _Node(c)) for name, c in self.cohorts.items())
        for name, cohort in self.cohorts.items():
            self._link(name, cohort.parent, f"cohort {name!r}: unknown parent")
        for name, queue in self.queues.items():
            self._link(name, queue.cohort, f"queue {name!r}: unknown cohort")
        for name in self.cohorts:
            self._refuse_cycle(name)
        for node in self.nodes.values():
            if node.parent is None:
                self._set_quotas(node, node)

    def _link(self, name: str, parent: str | None, unknown: str) -> None:
        if parent is None:
            return
        if parent not in self.cohorts:
            raise InvalidRequest(f"{unknown} {parent!r}")
        child, node = self.nodes[name], self.nodes[parent]
        child.parent = node
        node.children.append(child)

    def _refuse_cycle(self, name: str) -> None:
        seen = {name}
        node = self.nodes[name].parent
        while node is not None:
            if node.name in seen:
                raise InvalidRequest(f"cohort {name!r}: its parents form a cycle")
            seen.add(node.name)
            node = node.parent

    def _set_quotas(self, node: _Node, root: _Node) -> None:
        """Q2 (docs/queues.md), bottom up: ``subtree`` and ``guaranteed`` under ``node``."""
        node.root = root
        node.subtree = node.nominal
        for child in node.children:
            self._set_quotas(child, root)
            node.subtree += child.subtree - child.guaranteed
        if node.lending_limit is not None:
            node.guaranteed = max(0, node.subtree - node.lending_limit)

    # ------------------------------------------------------------------ usage

    def add(self, queue: str, gpus: int) -> None:
        """A job of ``queue`` took (``gpus > 0``) or gave back (``< 0``) GPUs."""
        node: _Node | None = self.nodes[queue]
        while node is not None:  # what the node takes from its parent's pool, before and after
            guaranteed, usage = node.guaranteed, node.usage
            before = usage - guaranteed if usage > guaranteed else 0
            usage = node.usage = usage + gpus
            gpus = (usage - guaranteed if usage > guaranteed else 0) - before
            if gpus == 0:
                return
            node = node.parent

    def usage(self, name: str) -> int:
        """GPUs in use: a queue's jobs', or a cohort's members' beyond their guarantees."""
        return self.nodes[name].usage

    def available(self, queue: str) -> int:
        """docs/queues.md Q3: the most GPUs a new job of ``queue`` may take now (>= 0)."""
        return max(0, available_of(self.nodes[queue]))

    def reachable(self, queue: str) -> int:
        """The most GPUs ``queue`` could ever hold at once: what it may take with no usage."""
        return max(0, available_of(self.nodes[queue], empty=True))

    def borrowed(self, queue: str) -> int:
        """GPUs ``queue`` uses beyond its nominal quota."""
        node = self.nodes[queue]
        return max(0, node.usage - node.nominal)

    def share(self, queue: str, extra: int = 0) -> Share:
        """docs/queues.md Q8: the queue's share, with ``extra`` GPUs more in use.

        ``(weighted, unweighted)``: what it borrows over the GPUs its root cohort's tree
        holds, divided by its weight, then not divided (compared second: two queues of weight
        0 that borrow, ``inf`` both, compare their unweighted shares, as Kueue does); 0 while
        within its nominal quota.
        """
        return share_of(self.nodes[queue], extra)

    def path_share(self, queue: str, extra: int = 0) -> tuple[Share, ...]:
        """docs/queues.md Q8: the shares from the top of the queue's tree down to the queue.

        One ``Share`` per node below the root cohort, outermost first (a queue without a
        cohort: its own). Compared lexicographically, they order queues as Kueue's
        tournament does: two queues compare at the children of their lowest common cohort.
        With ``extra`` GPUs more in use by the queue (as ``add`` would carry them up, without
        changing the tree).
        """
        node = self.nodes[queue]
        shares = [_share(node, node.usage + extra)]
        parent = node.parent
        while parent is not None and parent.parent is not None:
            guaranteed = node.guaranteed
            before = node.usage - guaranteed if node.usage > guaranteed else 0
            after = node.usage + extra - guaranteed if node.usage + extra > guaranteed else 0
            extra = after - before  # what reaches the parent's usage
            node = parent
            shares.append(_share(node, node.usage + extra))
            parent = node.parent
        shares.reverse()
        return tuple(shares)

    def lca(self, a: str, b: str) -> _Node | None:
        """The lowest cohort holding both nodes (``None``: different trees)."""
        above: set[int] = set()
        node: _Node | None = self.nodes[a]
        while node is not None:
            above.add(id(node))
            node = node.parent
        node = self.nodes[b]
        while node is not None and id(node) not in above:
            node = node.parent
        return node

    def between(self, name: str, top: _Node) -> list[_Node]:
        """The cohorts strictly between a node and one of its ancestors, bottom up."""
        found = []
        node = self.nodes[name].parent
        while node is not None and node is not top:
            found.append(node)
            node = node.parent
        return found

    def lent(self, queue: str) -> float:
        """GPUs of ``queue``'s unused lendable quota that borrowers of its tree use.

        The tree's borrowed GPUs are counted against its queues' unused lendable quota in
        proportion to it (a metric; docs/queues.md Q9).
        """
        node = self.nodes[queue]
        if node.parent is None:
            return 0.0
        queues = [n for n in self.nodes.values() if n.is_queue and n.root is node.root]
        borrowed = sum(max(0, n.usage - n.nominal) for n in queues)
        idle = {n.name: max(0, min(n.nominal - n.usage, n.nominal - n.guaranteed)) for n in queues}
        total = sum(idle.values())
        return 0.0 if total == 0 else min(borrowed, total) * idle[queue] / total

    def same_tree(self, queue: str, other: str) -> bool:
        """Whether two queues share a root cohort (and so lend to each other)."""
        a, b = self.nodes[queue], self.nodes[other]
        return a.parent is not None and b.parent is not None and a.root is b.root


Share = tuple[float, float]  # (weighted share, unweighted share): compared in that order


def share_of(node: _Node, extra: int = 0) -> Share:
    """docs/queues.md Q8 for a node of the tree (see :meth:`QuotaTree.share`)."""
    borrowed = node.usage + extra - node.nominal
    if borrowed <= 0:
        return (0.0, 0.0)
    raw = borrowed / max(node.root.subtree, 1)
    return (math.inf if node.weight == 0 else raw / node.weight, raw)


def node_share(node: _Node) -> Share:
    """Q8 for any node: ``(weighted, unweighted)`` share.

    What it uses beyond its quota (a queue's nominal, a cohort's subtree) over the GPUs its
    root's tree holds, divided by its weight; then not divided.
    """
    return _share(node, node.usage)


def _share(node: _Node, usage: int) -> Share:
    """``node_share`` with the node's usage given."""
    quota = node.nominal if node.is_queue else node.subtree
    borrowed = usage - quota
    if borrowed <= 0:
        return (0.0, 0.0)
    raw = borrowed / max(node.root.subtree, 1)
    return (math.inf if node.weight == 0 else raw / node.weight, raw)


def available_of(node: _Node, *, empty: bool = False) -> int:
    """docs/queues.md Q3: what the node may take now (may be < 0 when over).

    With ``empty``: what it could take with nothing running anywhere. docs/queues.md's
    recursion is evaluated from the root down: for each node below the root, what its
    parent may take, capped by its borrowing limit, plus its unused guarantee.
    """
    parent = node.parent
    if parent is None:
        return node.subtree - (0 if empty else node.usage)
    chain = [node]
    while parent.parent is not None:  # a queue under a root cohort skips this loop
        chain.append(parent)
        parent = parent.parent
    value = parent.subtree - (0 if empty else parent.usage)
    for below in reversed(chain):
        guaranteed, limit = below.guaranteed, below.borrowing_limit
        usage = 0 if empty else below.usage
        if limit is not None:
            above = usage - guaranteed if usage > guaranteed else 0
            value = min(value, below.subtree - guaranteed - above + limit)
        if guaranteed > usage:
            value += guaranteed - usage
    return value
