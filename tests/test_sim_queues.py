"""``gangplace simulate --queues FILE`` (docs/queues.md, Q10 and "Simulation"):
the file's checks, the replay with queues, and the per-queue figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_sim import run_cli

from gangplace.sim.clusters import parse_cluster
from gangplace.sim.errors import SimError
from gangplace.sim.metrics import summarize
from gangplace.sim.queues import QueueSetup, load_queues
from gangplace.sim.replay import Replay
from gangplace.sim.settings import SimSettings
from gangplace.sim.traces import Job

SMALL = "tree:1,2,2,4"  # 16 GPUs
TEAMS = {
    "cohorts": [{"name": "lab"}],
    "queues": [
        {"name": "a", "cohort": "lab", "nominal": 8, "reclaim_within_cohort": "any"},
        {"name": "b", "cohort": "lab", "nominal": 8},
    ],
    "owners": {"team-b": "b"},
}


def test_a_borrower_is_reclaimed_and_the_figures_say_so() -> None:
    jobs = [
        Job("b-big", 0, 1000, 16, 4, 4, owner="team-b"),  # borrows all of a's 8 GPUs
        Job("a-job", 10, 10, 8, 2, 4, owner="a"),  # reclaims them at t=10
        Job("nobody", 20, 10, 4, 1, 4, owner="stranger"),  # no queue: rejected
    ]
    settings = SimSettings(queues=TEAMS, checkpoint_s=None)
    result = Replay(jobs, parse_cluster(SMALL), "best-fit", settings).run()
    big, reclaiming, stranger = result.records
    assert reclaiming.start_s == 10 and big.restarts == 1 and result.preemptions == 1
    assert stranger.rejected == "owner 'stranger' has no queue in the queues file"
    figures = summarize(result, parse_cluster(SMALL), (0.0, 20.0))["queues"]
    assert figures["b"]["reclaimed_jobs"] == 1
    assert figures["b"]["reclaimed_gpu_h"] == pytest.approx(16 * 10 / 3600)
    assert figures["b"]["borrowed_gpu_h"] == pytest.approx(8 * 10 / 3600)
    assert figures["a"]["wait_s"]["jobs"] == 1 and figures["a"]["wait_s"]["mean"] == 0.0
    assert figures["a"]["share_nominal"] == 0.5


def test_a_reclaim_under_an_eviction_grace_starts_once_the_victims_pods_ended() -> None:
    """docs/scheduler.md S17 in the simulator: the GPUs stay idle for the grace."""
    jobs = [
        Job("b-big", 0, 1000, 16, 4, 4, owner="team-b"),
        Job("a-job", 10, 10, 8, 2, 4, owner="a"),
    ]
    settings = SimSettings(queues={**TEAMS, "eviction_grace": 30}, checkpoint_s=None)
    result = Replay(jobs, parse_cluster(SMALL), "best-fit", settings).run()
    big, reclaiming = result.records
    assert reclaiming.start_s == 40 and reclaiming.end_s == 50, "reclaimed at 10, +30 s"
    assert big.restarts == 1 and result.preemptions == 1
    assert big.end_s is not None and big.end_s >= 1040, "it ran again after the grace"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "expected an object"),
        ({"queues": [{"name": "a"}], "eviction_grace": -1}, "eviction_grace must be seconds"),
        ({"queues": [{"name": "a"}], "eviction_grace": "30"}, "eviction_grace must be seconds"),
        ({"queues": [], "colour": 1}, "unknown field 'colour'"),
        ({"queues": [{"nominal": 4}]}, "queues[0]: expected an object with a name"),
        ({"queues": [{"name": "a", "nominal": -1}]}, "queues[0]: nominal['gpu'] must be"),
        ({"queues": [{"name": "a", "nominal": "8"}]}, "queues[0]: nominal must be an int"),
        ({"queues": [{"name": "a", "size": 8}]}, "queues[0]: unknown field 'size'"),
        ({"queues": [{"name": "a", "cohort": "x"}]}, "unknown cohort 'x'"),
        ({"queues": [{"name": "a"}], "owners": {"o": "b"}}, "owners['o'] names unknown queue"),
        ({"queues": [{"name": "a"}], "default_queue": "z"}, "default_queue 'z' is no queue"),
        ({"queues": [{"name": "a"}], "fair_sharing": "yes"}, "fair_sharing must be true"),
        ({"queues": "a"}, "queues must be a list"),
        ({"queues": []}, "at least one"),
    ],
)
def test_bad_queue_files_name_the_field(raw: Any, message: str) -> None:
    with pytest.raises(SimError, match=message.replace("[", r"\[").replace("]", r"\]")):
        SimSettings(queues=raw)


def test_the_file_is_read_as_json_and_a_bad_file_is_a_sim_error(tmp_path: Path) -> None:
    good = tmp_path / "teams.json"
    good.write_text(json.dumps(TEAMS))
    assert load_queues(good) == TEAMS
    setup = QueueSetup.parse(TEAMS)
    assert (setup.queue_of("team-b"), setup.queue_of("a"), setup.queue_of("x")) == ("b", "a", None)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(SimError, match="not JSON"):
        load_queues(broken)
    with pytest.raises(SimError, match="queues file"):
        load_queues(tmp_path / "missing.json")


def test_preempting_policies_refuse_queues() -> None:
    jobs = [Job("j", 0, 10, 4, 1, 4, owner="a")]
    with pytest.raises(SimError, match="preempts by priority"):
        Replay(jobs, parse_cluster(SMALL), "best-fit+preempt", SimSettings(queues=TEAMS))


def test_cli_with_queues_reports_each_queue(tmp_path: Path) -> None:
    trace = tmp_path / "teams.csv"
    rows = ["arrival_s,duration_s,gpus,owner"]
    rows += [f"{i * 10},{600 + i * 30},4,{'a' if i % 3 else 'team-b'}" for i in range(30)]
    trace.write_text("\n".join(rows) + "\n")
    teams = tmp_path / "teams.json"
    teams.write_text(json.dumps({**TEAMS, "fair_sharing": True}))
    done = run_cli(
        "simulate",
        "--trace",
        str(trace),
        "--cluster",
        SMALL,
        "--seeds",
        "0-1",
        "--policies",
        "best-fit,first-fit",
        "--queues",
        str(teams),
        "--out",
        str(tmp_path / "out"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "queue a, best-fit: wait" in done.stdout and "queue b, first-fit" in done.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert set(report["policies"]["best-fit"]["queues"]) == {"a", "b"}
    assert report["settings"]["queues"]["fair_sharing"] is True
    assert (tmp_path / "out" / "queues.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = run_cli("simulate", "--queues", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert bad.returncode != 0 and "queues file" in bad.stderr and "Traceback" not in bad.stderr
