"""max_level: fabrics that never join (docs/placement.md, rule 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import as_tuple
from hypothesis import given, settings
from hypothesis import strategies as st

from gangplace import Cluster, GangRequest, InvalidRequest, Unschedulable, reference
from gangplace.slurm import cluster_from_topology_conf

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _fabrics(kind: Any = Cluster, **kwargs: Any) -> Any:
    cluster = kind(("spine", "rack"), clock=lambda: 1.0, **kwargs)
    for spine in ("s0", "s1"):
        for rack in range(2):
            for node in range(2):
                cluster.add_node(
                    f"{spine}-r{rack}-n{node}",
                    gpus=8,
                    topology={"spine": spine, "rack": f"{spine}-r{rack}"},
                )
    return cluster


def test_no_placement_spans_two_domains_of_max_level() -> None:
    joined, apart = _fabrics(), _fabrics(max_level="spine")
    assert apart.max_level == "spine" and joined.max_level is None
    wide = GangRequest(6, 8)  # more than one spine's 4 nodes
    assert joined.place_gang(wide) is not None
    assert apart.place_gang(wide) is None
    with pytest.raises(Unschedulable, match=r"no placement spans more than one spine \(max_level"):
        apart.reserve(wide)
    assert "max_level" in apart.explain(wide).summary
    fits = apart.place_gang(GangRequest(4, 8))
    assert fits is not None and fits.level == "spine"
    elastic = apart.place_gang(GangRequest(6, 8, min_pods=2))
    assert elastic is not None and len(elastic) == 4  # shrinks to one spine
    assert _fabrics(max_level="cluster").max_level is None
    with pytest.raises(InvalidRequest, match='max_level "row" is not a level'):
        _fabrics(max_level="row")


def test_max_level_survives_snapshots_and_old_snapshots_still_restore() -> None:
    apart = _fabrics(max_level="rack")
    again = Cluster.restore(apart.snapshot())
    assert again.max_level == "rack" and again.place_gang(GangRequest(3, 8)) is None
    old = Cluster.restore((FIXTURES / "snapshot-v2.bin").read_bytes(), clock=lambda: 5.0)
    assert old.max_level is None and len(old) == 8
    assert [a.owner for a in old.allocations(owner="team")] == ["team"]
    assert old.node("s1-r1-n1").cordoned and old.node("s0-r0-n0").unhealthy == (2,)


@settings(max_examples=200)
@given(
    max_level=st.sampled_from([None, "spine", "rack", "node"]),
    requests=st.lists(
        st.tuples(
            st.integers(1, 9),
            st.sampled_from([1, 4, 8]),
            st.sampled_from([None, "spine", "rack"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_max_level_agrees_with_the_reference(
    max_level: str | None, requests: list[tuple[int, int, str | None, bool]]
) -> None:
    engine = _fabrics(max_level=max_level)
    oracle = _fabrics(reference.Cluster, max_level=max_level)
    for pods, gpus, level, elastic in requests:
        request = GangRequest(pods, gpus, required_level=level, min_pods=1 if elastic else None)
        got, want = engine.place_gang(request), oracle.place_gang(request)
        assert as_tuple(got) == as_tuple(want)
        if got is not None:
            engine.reserve(request)
            oracle.reserve(request)
        else:
            with pytest.raises(Unschedulable) as ours:
                engine.reserve(request)
            with pytest.raises(Unschedulable) as theirs:
                oracle.reserve(request)
            assert ours.value.reason == theirs.value.reason


def test_slurm_fabrics_without_a_common_top_never_join() -> None:
    conf = (
        "SwitchName=top1 Switches=leaf[1-2]\nSwitchName=top2 Switches=leaf[3-4]\n"
        "SwitchName=leaf1 Nodes=a[1-2]\nSwitchName=leaf2 Nodes=a[3-4]\n"
        "SwitchName=leaf3 Nodes=b[1-2]\nSwitchName=leaf4 Nodes=b[3-4]\n"
    )
    cluster = cluster_from_topology_conf(conf, gpus=8)
    assert cluster.max_level == "switch1"
    assert cluster.place_gang(GangRequest(4, 8)) is not None
    assert cluster.place_gang(GangRequest(5, 8)) is None  # would span both fabrics
    joined = cluster_from_topology_conf(conf, gpus=8, max_level=None)
    assert joined.place_gang(GangRequest(5, 8)) is not None
    single = cluster_from_topology_conf("SwitchName=leaf1 Nodes=a[1-2]\n", gpus=8)
    assert single.max_level is None
