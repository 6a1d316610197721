//! Operation scripts: arbitrary bytes decoded into a sequence of engine operations, run
//! against a small two-level cluster while every guarantee is checked after every step.
//!
//! This is the harness of the property tests (`tests/scripts.rs`) and of the cargo-fuzz
//! targets (`fuzz/`): any byte string is a valid script, so a fuzzer explores operation
//! sequences directly. [`run`] returns `Err` with a description when a guarantee breaks:
//!
//! - `check_invariants` passes after every operation (aggregates, ledger against nodes);
//! - on every node, free + reserved + allocated + unhealthy-and-unheld = all GPUs;
//! - an operation that fails with a typed error leaves the state byte-identical
//!   (compared through snapshots), and no operation returns `Internal`;
//! - `restore(snapshot())` gives back the same bytes, and the run continues on the copy;
//! - a corrupted snapshot is refused with `InvalidSnapshot`, never restored half-way.

use std::sync::Arc;

use crate::config::{EngineConfig, Policy};
use crate::engine::Engine;
use crate::error::CoreError;
use crate::ids::HoldId;
use crate::model::{
    DefragOptions, Effect, GangRequest, Operator, RemovalLimits, Requirement, Taint, Terms,
    Toleration,
};
use crate::topology::NodeSpec;

/// One decoded operation; the small integers are reduced modulo the script's ranges.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Adds node `n{slot}` in rack `r{rack}` of spine `s{rack % 2}`.
    AddNode { slot: u8, rack: u8, gpus: u8 },
    /// Removes node `n{slot}`.
    RemoveNode { slot: u8 },
    /// Flips one GPU's health.
    Health { slot: u8, gpu: u8, healthy: bool },
    /// Cordons or uncordons a node.
    Cordon { slot: u8, cordoned: bool },
    /// Reserves a gang of priority `priority` (with a label selector when the top bit of
    /// `ttl` is set).
    Reserve {
        pods: u8,
        gpus_per_pod: u8,
        min_pods: u8,
        level: u8,
        owner: u8,
        ttl: u8,
        priority: u8,
    },
    /// Plans a preemption (or, with `defrag`, a defragmentation) for a gang of priority
    /// `priority` and applies the plan.
    Preempt {
        pods: u8,
        gpus_per_pod: u8,
        priority: u8,
        owner: u8,
        defrag: bool,
    },
    /// Places a gang, marks GPU 0 of node `n{flip_slot}` unhealthy when that slot exists
    /// (possibly making the placement stale), then reserves the placement.
    ReservePlacement {
        pods: u8,
        gpus_per_pod: u8,
        owner: u8,
        flip_slot: u8,
    },
    /// Commits the `hold`-th id seen so far, as `owner`.
    Commit { hold: u8, owner: u8 },
    /// Rolls back the `hold`-th id seen so far.
    Rollback { hold: u8, owner: u8 },
    /// Releases the `hold`-th id seen so far.
    Release { hold: u8, owner: u8 },
    /// Ends the ranks of bit mask `ranks` of the `hold`-th id seen so far.
    ReleasePods { hold: u8, owner: u8, ranks: u8 },
    /// Advances the clock.
    Tick { seconds: u8 },
    /// Snapshots, restores, compares, and continues on the restored engine.
    Snapshot,
    /// Snapshots, flips one byte, and expects the restore to be refused.
    Corrupt { at: u16, xor: u8 },
}

const SLOTS: u8 = 12;
const OWNERS: [Option<&str>; 3] = [None, Some("team-a"), Some("team-b")];
const LEVELS: [Option<&str>; 6] = [
    None,
    Some("node"),
    Some("rack"),
    Some("spine"),
    Some("cluster"),
    Some("row"),
];

/// Decodes bytes into operations. Total: every byte string decodes, missing parameter
/// bytes read as zero.
pub fn decode(bytes: &[u8]) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut rest = bytes;
    while let Some((&selector, tail)) = rest.split_first() {
        let take = |count: usize| {
            let mut params = [0u8; 6];
            for (param, &byte) in params.iter_mut().zip(tail.iter().take(count)) {
                *param = byte;
            }
            (params, count.min(tail.len()))
        };
        let (op, used) = match selector % 14 {
            0 => {
                let (p, used) = take(3);
                (
                    Op::AddNode {
                        slot: p[0] % SLOTS,
                        rack: p[1] % 4,
                        gpus: p[2] % 9,
                    },
                    used,
                )
            }
            1 => {
                let (p, used) = take(1);
                (Op::RemoveNode { slot: p[0] % SLOTS }, used)
            }
            2 => {
                let (p, used) = take(3);
                let healthy = p[2] % 2 == 0;
                (
                    Op::Health {
                        slot: p[0] % SLOTS,
                        gpu: p[1] % 10,
                        healthy,
                    },
                    used,
                )
            }
            3 => {
                let (p, used) = take(2);
                (
                    Op::Cordon {
                        slot: p[0] % SLOTS,
                        cordoned: p[1] % 2 == 0,
                    },
                    used,
                )
            }
            4 | 5 => {
                let (p, used) = take(6);
                let op = Op::Reserve {
                    pods: p[0] % 8,
                    gpus_per_pod: p[1] % 10,
                    min_pods: p[2] % 8,
                    level: p[3] % 6,
                    owner: p[4] % 3,
                    ttl: p[5],
                    priority: p[3] / 6 % 3,
                };
                (op, used)
            }
            6 => {
                let (p, used) = take(4);
                let op = Op::ReservePlacement {
                    pods: p[0] % 6,
                    gpus_per_pod: p[1] % 9,
                    owner: p[2] % 3,
                    flip_slot: p[3] % (SLOTS * 2),
                };
                (op, used)
            }
            7 => {
                let (p, used) = take(2);
                (
                    Op::Commit {
                        hold: p[0],
                        owner: p[1] % 3,
                    },
                    used,
                )
            }
            8 => {
                let (p, used) = take(2);
                (
                    Op::Rollback {
                        hold: p[0],
                        owner: p[1] % 3,
                    },
                    used,
                )
            }
            9 => {
                let (p, used) = take(2);
                (
                    Op::Release {
                        hold: p[0],
                        owner: p[1] % 3,
                    },
                    used,
                )
            }
            10 => {
                let (p, used) = take(1);
                (Op::Tick { seconds: p[0] }, used)
            }
            13 => {
                let (p, used) = take(3);
                let op = Op::ReleasePods {
                    hold: p[0],
                    owner: p[1] % 3,
                    ranks: p[2],
                };
                (op, used)
            }
            12 => {
                let (p, used) = take(4);
                let op = Op::Preempt {
                    pods: p[0] % 6,
                    gpus_per_pod: p[1] % 9,
                    priority: p[2] % 4,
                    owner: p[3] % 3,
                    defrag: p[3] & 0x80 != 0,
                };
                (op, used)
            }
            _ => {
                let (p, used) = take(4);
                if p[3] % 2 == 0 {
                    (Op::Snapshot, used)
                } else {
                    let at = u16::from_le_bytes([p[0], p[1]]);
                    (Op::Corrupt { at, xor: p[2] | 1 }, used)
                }
            }
        };
        ops.push(op);
        rest = &tail[used..];
    }
    ops
}

/// What a script did, for the curious (fuzz statistics, test sanity checks).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Operations run.
    pub operations: usize,
    /// Operations refused with a typed error.
    pub refused: usize,
    /// Snapshots restored.
    pub restores: usize,
}

struct Run {
    engine: Engine,
    now: f64,
    ids: Vec<HoldId>,
    outcome: Outcome,
}

fn node_name(slot: u8) -> String {
    format!("n{slot}")
}

fn request(
    pods: u8,
    gpus_per_pod: u8,
    min_pods: u8,
    level: u8,
    label: Option<(String, String)>,
) -> Result<GangRequest, CoreError> {
    let min_pods = (min_pods > 0).then_some(i64::from(min_pods));
    let level = LEVELS[usize::from(level) % LEVELS.len()].map(str::to_owned);
    let pods = i64::from(pods);
    GangRequest::new(
        pods,
        i64::from(gpus_per_pod),
        min_pods,
        level,
        label.into_iter().collect(),
        String::new(),
    )
}

/// Runs the script encoded by `bytes`. `Err` says which guarantee broke.
pub fn run(bytes: &[u8]) -> Result<Outcome, String> {
    let levels = vec!["spine".into(), "rack".into()];
    let config =
        EngineConfig::new(levels, Policy::BestFit, Some(40)).map_err(|error| error.to_string())?;
    let engine = Engine::new(config);
    let mut state = Run {
        engine,
        now: 0.0,
        ids: Vec::new(),
        outcome: Outcome::default(),
    };
    for slot in 0..6 {
        state.apply(&Op::AddNode {
            slot,
            rack: slot % 3,
            gpus: 8,
        })?;
    }
    for op in decode(bytes) {
        state.apply(&op)?;
    }
    Ok(state.outcome)
}

impl Run {
    fn snapshot(&mut self) -> Result<Vec<u8>, String> {
        self.engine
            .snapshot(self.now)
            .map_err(|error| error.to_string())
    }

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        self.engine.stats(self.now); // reclaim expired holds before the "before" picture
        let before = self.snapshot()?;
        let result = self.step(op);
        self.outcome.operations += 1;
        match result {
            Ok(()) => {}
            Err(CoreError::InternalError(message)) => {
                return Err(format!("{op:?}: internal: {message}"));
            }
            Err(error) => {
                self.outcome.refused += 1;
                if self.snapshot()? != before {
                    return Err(format!("{op:?} failed ({error}) but changed the state"));
                }
            }
        }
        self.check()
            .map_err(|message| format!("after {op:?}: {message}"))
    }

    fn pick(&self, index: u8) -> HoldId {
        match self.ids.len() {
            0 => HoldId::from_bits(0), // never handed out: unknown
            len => self.ids[usize::from(index) % len],
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), CoreError> {
        let now = self.now;
        let engine = &mut self.engine;
        match *op {
            Op::AddNode { slot, rack, gpus } => engine.add_node(NodeSpec {
                name: node_name(slot),
                gpus: i64::from(gpus),
                topology: vec![
                    ("spine".into(), format!("s{}", rack % 2)),
                    ("rack".into(), format!("r{rack}")),
                ],
                labels: vec![("pool".into(), format!("p{}", slot % 2))],
                unhealthy: Vec::new(),
                // Odd slots have two NUMA halves, so scripts also exercise GPU groups.
                gpu_topology: (slot % 2 == 1).then(|| {
                    let gpus = u32::from(gpus).max(1);
                    let halves = (0..gpus).map(|gpu| vec![gpu * 2 / gpus]).collect();
                    (vec!["numa".to_owned()], halves)
                }),
                resources: Vec::new(),
                // Every fourth slot is tainted: only requests that tolerate it use it.
                taints: (slot % 4 == 3)
                    .then(|| Taint::new("dedicated".into(), "x".into(), Effect::NoSchedule))
                    .transpose()?
                    .into_iter()
                    .collect(),
            }),
            Op::RemoveNode { slot } => engine.remove_node(&node_name(slot), now).map(drop),
            Op::Health { slot, gpu, healthy } => engine
                .set_gpu_health(&node_name(slot), i64::from(gpu), healthy, now)
                .map(drop),
            Op::Cordon { slot, cordoned } => engine.set_cordoned(&node_name(slot), cordoned, now),
            Op::Reserve {
                pods,
                gpus_per_pod,
                min_pods,
                level,
                owner,
                ttl,
                priority,
            } => {
                // The top bit of `ttl` adds a label selector: exercises the selector pools.
                let label = (ttl & 0x80 != 0).then(|| ("pool".to_owned(), format!("p{}", ttl & 1)));
                let request = request(pods, gpus_per_pod, min_pods, level, label)?;
                // One-GPU pods with an odd `min_pods` ask a fraction of a GPU (docs/resources.md
                // "Fractions of a GPU"): 250, 500 or 750 thousandths by owner.
                let milli =
                    (gpus_per_pod == 1 && min_pods % 2 == 1).then(|| 250 * (1 + i64::from(owner)));
                let request = request.with_gpu_milli(milli)?;
                // Bit 6 of `ttl` tolerates the tainted slots; bit 5 asks them by affinity.
                let tolerate = Toleration::new("dedicated".into(), "Exists", String::new(), None)?;
                let tolerations = if ttl & 0x40 != 0 {
                    vec![tolerate]
                } else {
                    Vec::new()
                };
                let affinity = if ttl & 0x20 != 0 {
                    let pool = Requirement::new("pool".into(), Operator::NotIn, vec!["p0".into()])?;
                    vec![vec![pool]]
                } else {
                    Vec::new()
                };
                let request = request.with_affinity(affinity, tolerations)?;
                // Odd levels' jobs are movable: defragmentation has candidates.
                let terms = Terms::new(i64::from(priority), true, level % 2 == 1)?;
                let request = Arc::new(request.with_terms(terms));
                let owner = OWNERS[usize::from(owner)];
                let ttl = f64::from(ttl & 0x7f) / 4.0;
                let reservation = engine.reserve(&request, ttl, owner, now)?;
                self.ids.push(reservation.id);
                Ok(())
            }
            Op::ReservePlacement {
                pods,
                gpus_per_pod,
                owner,
                flip_slot,
            } => {
                let request = request(pods, gpus_per_pod, 0, 0, None)?;
                let Some(placement) = engine.place(&request, now)? else {
                    return Ok(());
                };
                if flip_slot < SLOTS {
                    // Make the placement stale on purpose; ignore unknown nodes.
                    let _ = engine.set_gpu_health(&node_name(flip_slot), 0, false, now);
                    self.engine.stats(now);
                }
                let owner = OWNERS[usize::from(owner)];
                let before = self.engine.snapshot(now)?;
                match self.engine.reserve_placement(
                    &Arc::new(placement),
                    30.0,
                    owner,
                    Terms::default(),
                    now,
                ) {
                    Ok(reservation) => self.ids.push(reservation.id),
                    Err(CoreError::Conflict(_) | CoreError::LimitExceeded(_)) => {
                        if self.engine.snapshot(now)? != before {
                            return Err(CoreError::InternalError(
                                "a conflict changed the state".into(),
                            ));
                        }
                    }
                    Err(error) => return Err(error),
                }
                Ok(())
            }
            Op::Commit { hold, owner } => {
                let id = self.pick(hold);
                self.engine
                    .commit(id, OWNERS[usize::from(owner)], now)
                    .map(drop)
            }
            Op::Rollback { hold, owner } => {
                let id = self.pick(hold);
                self.engine
                    .rollback(id, OWNERS[usize::from(owner)], now)
                    .map(drop)
            }
            Op::Release { hold, owner } => {
                let id = self.pick(hold);
                self.engine
                    .release(id, OWNERS[usize::from(owner)], now)
                    .map(drop)
            }
            Op::ReleasePods { hold, owner, ranks } => {
                let id = self.pick(hold);
                let ranks: Vec<i64> = (0..8).filter(|bit| ranks & (1 << bit) != 0).collect();
                self.engine
                    .release_pods(id, &ranks, OWNERS[usize::from(owner)], now)
                    .map(drop)
            }
            Op::Preempt {
                pods,
                gpus_per_pod,
                priority,
                owner,
                defrag,
            } => {
                let request = request(pods, gpus_per_pod, 0, 0, None)?;
                let terms = Terms::new(i64::from(priority), true, false)?;
                let request = Arc::new(request.with_terms(terms));
                let limits = RemovalLimits::default();
                let owner = OWNERS[usize::from(owner)];
                if defrag {
                    let options = DefragOptions {
                        allow_downgrade: priority % 2 == 0,
                        evict_unplaceable: priority > 1,
                    };
                    if let Some(plan) = engine.plan_defrag(&request, &limits, options, now)? {
                        let (reservation, moved) = engine.apply_defrag(&plan, 30.0, owner, now)?;
                        self.ids.push(reservation.id);
                        self.ids.extend(moved.into_iter().map(|(_, r)| r.id));
                    }
                    return Ok(());
                }
                let Some(plan) = engine.plan_preemption(&request, &limits, now)? else {
                    return Ok(());
                };
                let outranked = plan.max_victim_priority.is_none_or(|p| p < terms.priority);
                if !outranked {
                    return Err(CoreError::InternalError(
                        "a victim outranks the gang".into(),
                    ));
                }
                let reservation = engine.preempt(&plan, 30.0, owner, now)?;
                self.ids.push(reservation.id);
                Ok(())
            }
            Op::Tick { seconds } => {
                self.now += f64::from(seconds) / 2.0;
                Ok(())
            }
            Op::Snapshot => {
                let bytes = engine.snapshot(now)?;
                let mut restored = Engine::restore(&bytes, now)?;
                if restored.snapshot(now)? != bytes {
                    return Err(CoreError::InternalError(
                        "restore(snapshot()) differs".into(),
                    ));
                }
                self.engine = restored;
                self.outcome.restores += 1;
                Ok(())
            }
            Op::Corrupt { at, xor } => {
                let mut bytes = engine.snapshot(now)?;
                let index = usize::from(at) % bytes.len();
                bytes[index] ^= xor;
                match Engine::restore(&bytes, now) {
                    Err(CoreError::InvalidSnapshot(_)) => Ok(()),
                    Err(error) => Err(CoreError::InternalError(format!(
                        "corrupt snapshot: {error}"
                    ))),
                    Ok(_) => Err(CoreError::InternalError(
                        "a corrupted snapshot was restored".into(),
                    )),
                }
            }
        }
    }

    fn check(&mut self) -> Result<(), String> {
        self.engine
            .check_invariants()
            .map_err(|error| error.to_string())?;
        for name in self.engine.node_names() {
            let info = self
                .engine
                .node_info(&name, self.now)
                .map_err(|e| e.to_string())?;
            let idle_unhealthy = info
                .unhealthy
                .iter()
                .filter(|gpu| !info.allocated.contains(gpu));
            // A shared GPU (docs/resources.md "Fractions of a GPU") is in none of the lists but unhealthy;
            // one shared past a whole GPU is not counted, so the check fails.
            let healthy_shared = (info.shared.iter())
                .filter(|(gpu, used)| *used <= 1000 && !info.unhealthy.contains(gpu));
            let accounted = info.free.len()
                + info.reserved.len()
                + info.allocated.len()
                + idle_unhealthy.count()
                + healthy_shared.count();
            if accounted != info.gpus as usize {
                return Err(format!(
                    "node {name} accounts for {accounted} of {} GPUs",
                    info.gpus
                ));
            }
        }
        Ok(())
    }
}
