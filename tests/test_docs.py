"""The README's Python example and the modules' doctests run as written."""

from __future__ import annotations

import doctest
import re
from pathlib import Path
from types import ModuleType

import pytest

import gangplace
import gangplace._quick
import gangplace.k8s
import gangplace.k8s.build
import gangplace.reference
import gangplace.scheduler.core
import gangplace.slurm
import gangplace.synth

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_blocks_run(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README lost its Python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
    printed = capsys.readouterr().out
    assert "rack ('s1', 'r2') ('r2-n0', 'r2-n1', 'r2-n2', 'r2-n3')" in printed
    assert "best rack s1/r2 holds 4 of 5" in printed
    assert "[True, True, False]" in printed  # the bulk example's reserve_many
    assert "{'a1': 8, 'a2': 8}" in printed and "{'b': 4}" in printed  # gpus_from_conf
    assert "--gres=gpu:2 : --nodelist=gpu06" in printed  # a heterogeneous sbatch job
    # bind: the second pod's binding fails, the first stays bound
    assert "('ml/job-0',) ('ml/job-1', 'binding to n1: RuntimeError: HTTP 500') ()" in printed
    assert "('patch', 'job-0', 'application/merge-patch+json')" in printed
    assert "('r1',) True -5" in printed  # preemption: the rack whose job matters least
    assert "('r0',) ['r1-n1', 'r2-n0']" in printed  # defragmentation: moves to the edge
    assert "[('pretrain', False), ('eval', True)]" in printed  # the scheduler's backfill
    assert "['finetune']" in printed
    assert "['a', 'long'] 100.0 ('b0', 'b1', 'b2')" in printed  # S5: beside a reservation
    assert "the blocked head: it does not fit now" in printed  # Scheduler.pending, S10
    assert "()\n('batch',)" in printed  # S11: min_runtime spares a young victim
    assert "0.0 ['submitted', 'started', 'preempted']" in printed  # S14: its history
    assert "('f0', 'f1') 1 ('f0', 'f2')" in printed  # S13: a failure repaired in place
    assert "4 nlp\nvision-train ('r1',) ['nlp-0', 'nlp-1']" in printed  # queues: a reclaim
    assert "nlp queue 'nlp' lets it take 0 GPUs now, it needs 8" in printed
    assert 'gang "finetune" of 2 pods x 8 GPUs does not fit: no node holds a pod' in printed
    assert "fgd toy: random 71.6%\nfgd toy: bestfit 79.7%" in printed  # the FGD experiment
    assert "rack ('r0',) 8" in printed  # adopt
    assert "1 ('a0', 'a1')\n('a3',)" in printed  # looking ahead: place_after, avoid
    assert "cluster ['a', 'b', 'c'] 5" in printed  # adopt(into=...)
    assert "['pod adopted', 'pod joined']\npod ended 0 8 1" in printed  # ClusterSync
    assert "pod #0 not adopted: metadata: expected an object" in printed
    assert "cluster (('r0',), ('r1',), ('r2',), ('r3',))" in printed  # slices
    assert "16 r1-t00" in printed
    assert "pack [8, 4, 0]" in printed and "balanced [6, 6, 0]" in printed  # spreads
    assert "(2, 3)" in printed  # GPU groups inside a node
    assert "False None" in printed  # numa="single"
    assert "('r1', 'fat') ('r1', 'fat')\n('r1', 'thin') None\ncpu 10000" in printed  # resources
    # repair with resources: the replacement goes where its CPUs fit, the merge frees a's
    assert "[(0, 'e')] {'cpu': 48000}\n['e', 'a', 'c', 'c'] {'cpu': 16000}" in printed
    assert "('r2', 'mig') [(), (), ()] 4" in printed  # MIG slices as resources
    assert "('r1', 'big') [(0,), (0,), (1,), (1,), (2,)]" in printed  # fractions of a GPU
    assert "{0: 920, 1: 920, 2: 460} (3,) 3\n('r1', 'small')\nbig (0,) 1000" in printed
    assert "[(0,), (1,)] {0: 600, 1: 600}" in printed  # adopt(gpu_milli=...)
    assert "('r1',) ['r1-n0', 'r1-n1', 'r1-n2', 'r1-n3']" in printed  # multi-role gangs
    assert "r1-n4 True" in printed
    assert "array True 16" in printed  # the MPIJob launcher beside 16 workers
    assert "('r1', 'big')\n('r2', 'fat') [(), (0, 1, 2, 3), (4, 5, 6, 7)] 8000" in printed
    assert "('r0',) True ['leader', 'workers']" in printed  # multi-role preemption
    assert "(0, 2) ()" in printed  # repair: lost ranks
    assert "True (0, 2) ['n4', 'n5']" in printed  # repair: the repair reservation
    assert "True () ['n4', 'n1', 'n5', 'n3']" in printed  # commit_repair: ranks kept
    assert "(0, 1, 2, 4, 5, 6, 7) merged" in printed
    assert "['n0', 'n1', 'n2', 'n3'] ['n4']" in printed  # spares
    assert "(2,) 8" in printed and "['n0', 'n1', 'n4', 'n3'] () ()" in printed
    assert "['n5']" in printed  # reserve_spares
    assert "None True" in printed and "preempted ['b0', 'b2']" in printed  # repair with preempt
    assert "None 2" in printed and "spine [(1, 'r1-n0'), (2, 'r1-n1')]" in printed  # repair plans
    assert "GangRequest(2, 8, name='pretrain') 300.0" in printed  # PodGroup
    assert "rack measured; spine, wider, NUMA GUESSED 1.7 per-GPU batch 57" in printed  # sim speed
    assert "spine/rack 1.41" in printed
    assert "[(True, (0, 1, 2, 3, 4, 5, 6, 7))]\na2\nbusy nodes keep" in printed  # holds_on
    assert "a2\nbusy nodes keep their place\n{'rack': 'b'} 4" in printed  # update_node
    assert "(1,) ['w0', 'w0', 'w1', 'w1'] 4" in printed  # release_pods
    assert "None released" in printed
    assert "GangRequest(64, 4, slices=(('rack', 16),))" in printed  # Kueue slices
    assert "('n2', 'n3') []" in printed  # k8s: the adopted gang keeps n0 and n1 busy
    assert "2 1000" in printed  # k8s: one allocation for the gang, at its priority
    assert "n3 {'metadata': {'annotations': {'gangplace.io/rank': '1'" in printed
    assert "['gpu01'] ['gpu02']" in printed  # scontrol
    assert "'--nodelist=gpu[03-04]'" in printed


@pytest.mark.parametrize(
    "module",
    [
        gangplace,
        gangplace._quick,
        gangplace.k8s.build,
        gangplace.reference,
        gangplace.scheduler.core,
        gangplace.slurm,
        gangplace.synth,
    ],
)
def test_doctests(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0
