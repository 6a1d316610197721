//! The ledger: live reservations and allocations, their expiry, a bounded memory of ended
//! ones, and the index of which holds sit on which node. Holding and ending a hold are the only
//! places GPU ownership bits change; each records its nodes' changes for the capacity views.
//! Repair reservations and spares change them too (submodule `repairs`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

mod changed;
mod pods;
mod repairs;
mod sharers;
mod victims;

use std::sync::Arc;
pub(crate) use victims::VictimIndex;

use crate::error::{CoreResult, internal};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::limits::REMEMBERED_ENDED_HOLDS;
use crate::model::MultiGangRequest;
use crate::model::{GangRequest, Placement, Terms};
use crate::resources::Amounts;
use crate::state::{Changes, NodeStates};

/// A hold's GPUs per node, sorted by node id.
pub type NodeGpus = smallvec::SmallVec<[(NodeId, GpuSet); 2]>;

/// Whether a live hold is a reservation or an allocation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HoldState {
    /// Held until `expires_at` unless committed.
    Reserved,
    /// Committed: held until released.
    Committed,
}

/// How a hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `rollback` freed it.
    RolledBack,
    /// Its lifetime ran out before `commit`.
    Expired,
    /// One of its GPUs became unhealthy before `commit`.
    Revoked,
    /// `release` freed the allocation.
    Released,
    /// `preempt` (or `apply_defrag`'s evictions) ended the allocation for a higher priority.
    Preempted,
    /// `apply_defrag` moved the allocation elsewhere (a new hold replaces it).
    Migrated,
    /// `commit_repair` merged the repair reservation into its allocation.
    Merged,
}

impl Ending {
    /// The name `hold_status` reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::RolledBack => "rolled-back",
            Ending::Expired => "expired",
            Ending::Revoked => "revoked",
            Ending::Released => "released",
            Ending::Preempted => "preempted",
            Ending::Migrated => "migrated",
            Ending::Merged => "merged",
        }
    }
}

/// A live hold.
#[derive(Debug, Clone)]
pub struct Hold {
    /// Reservation or allocation.
    pub state: HoldState,
    /// Clock seconds at which a reservation lapses.
    pub expires_at: f64,
    /// GPUs held, per node, sorted by node id (inline for up to two nodes, so that a walk
    /// over every hold, as preemption's candidates make, reads no other memory for most).
    pub gpus_by_node: NodeGpus,
    /// The placement handed out.
    pub placement: Arc<Placement>,
    /// Who may commit, roll back or release it (`None`: anyone).
    pub owner: Option<Arc<str>>,
    /// Priority and flags.
    pub terms: Terms,
    /// Clock time of `reserve`, then of `commit`.
    pub since: f64,
    /// The request it was placed for (`None` for `reserve(placement)`).
    pub request: Option<Arc<GangRequest>>,
    /// The multi-role request it was placed for (then `request` is `None`).
    pub roles: Option<Arc<MultiGangRequest>>,
    /// A repair reservation: the allocation it repairs and the ranks its pods replace.
    pub repair: Option<Arc<RepairLink>>,
    /// Ranks whose pods `release_pods` ended, sorted (docs/transactions.md "Ending some pods"): they keep
    /// their places in the placement and hold no GPUs.
    pub ended: Vec<u64>,
    /// What each pod asks besides GPUs (docs/resources.md "Node resources"): empty for nothing, one
    /// entry for every pod and spare alike (a request's), else one per pod in rank order.
    pub pod_resources: Arc<[Amounts]>,
    /// What it uses besides GPUs per node, by node id: its live pods' and spares' sums (set
    /// by the engine, which knows the nodes, before [`Ledger::hold`]).
    pub resources_by_node: Vec<(NodeId, Amounts)>,
    /// A node where it used resources was removed: a pod without GPUs may have been lost
    /// there (so [`Hold::held_differs`] says it may have lost ranks).
    pub resources_detached: bool,
}

/// What ties a repair reservation to its allocation (docs/repair.md "Repair after failures", R4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairLink {
    /// The allocation repaired.
    pub allocation: HoldId,
    /// The ranks the reservation's pods replace, sorted, one per pod in pod order.
    pub ranks: Vec<u64>,
    /// The ranks the allocation's own spares take, with those spares, in rank order (their
    /// GPUs are the allocation's already, so the reservation holds none for them).
    pub spares: Vec<(u64, crate::model::PodPlacement)>,
}

impl RepairLink {
    /// Every rank the repair replaces, sorted.
    pub fn all_ranks(&self) -> Vec<u64> {
        let mut ranks = self.ranks.clone();
        ranks.extend(self.spares.iter().map(|&(rank, _)| rank));
        ranks.sort_unstable();
        ranks
    }
}

impl Hold {
    /// GPUs held, over all nodes.
    pub fn gpu_count(&self) -> u64 {
        self.gpus_by_node
            .iter()
            .map(|&(_, gpus)| u64::from(gpus.count()))
            .sum()
    }

    /// Whether it holds fewer (or more) GPUs than its live ranks and spares name: a node
    /// removed under it takes its GPUs out of `gpus_by_node`.
    pub fn held_differs(&self) -> bool {
        if self.placement.gpu_milli.is_some() {
            // Shares, not GPUs (docs/resources.md "Fractions of a GPU"): what they lost is read from
            // the pods, their nodes and their GPUs' health each time.
            return true;
        }
        let ranks = (0u64..).zip(&self.placement.pods);
        let named: u64 = ranks
            .filter(|(rank, _)| self.ended.binary_search(rank).is_err())
            .map(|(_, pod)| u64::from(pod.gpus.count()))
            .sum::<u64>()
            + self
                .placement
                .spares
                .iter()
                .map(|pod| u64::from(pod.gpus.count()))
                .sum::<u64>();
        self.gpu_count() != named || self.resources_detached
    }
}

/// A hold that ended, remembered so that late calls get a precise answer.
#[derive(Debug, Clone)]
pub struct EndedHold {
    /// How it ended.
    pub ending: Ending,
    /// Its owner: calls by others still see an unknown id.
    pub owner: Option<Arc<str>>,
}

#[derive(Debug, Clone, Copy)]
struct Expiry {
    at: f64,
    id: HoldId,
}

impl PartialEq for Expiry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Expiry {}
impl PartialOrd for Expiry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Expiry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at.total_cmp(&other.at).then(self.id.cmp(&other.id))
    }
}

/// Live holds and the memory of ended ones.
#[derive(Debug, Default)]
pub struct Ledger {
    live: HashMap<HoldId, Hold>,
    ended: HashMap<HoldId, EndedHold>,
    ended_order: VecDeque<HoldId>,
    expiries: BTreeSet<Expiry>,
    /// GPUs held by live holds, per owner (`None`: holds made without an owner).
    held_by_owner: HashMap<Option<Arc<str>>, u64>,
    /// Per node slot: the live holds with GPUs there, in the order they were made.
    holders: Vec<Vec<(HoldId, GpuSet)>>,
    /// Per node slot: the live holds with shares of GPUs there (module `sharers`).
    sharers: sharers::Sharers,
    /// Per allocation: its live repair reservations, sorted by id.
    repairs: BTreeMap<HoldId, Vec<HoldId>>,
    /// The live holds whose GPUs differ from what their ranks and spares name
    /// (`Hold::held_differs`): with the holds on unhealthy GPUs, the only ones that may have
    /// lost ranks, so that finding those reads no other hold.
    irregular: BTreeSet<HoldId>,
    /// The nodes whose holds changed since the last [`Ledger::take_changed`] (module
    /// `changed`): what the kept preemption index re-reads.
    changed: changed::ChangedNodes,
    /// `Some(state)`: ids come from a seeded generator (splitmix64) instead of the operating
    /// system's randomness, so that a run is repeatable (simulations, tests).
    seeded_ids: std::cell::Cell<Option<u64>>,
    /// Test-only failpoint: panic between two node updates of a hold or an ending.
    #[cfg(feature = "testing")]
    pub(crate) panic_mid_apply: bool,
    /// Test-only: hand out ids counting up from this value instead of random ones, so that a
    /// test can compare id tie-breaks with the reference.
    #[cfg(feature = "testing")]
    pub(crate) next_sequential_id: std::cell::Cell<Option<u128>>,
}

impl Ledger {
    /// A fresh id with 128 random bits (or seeded ones), unused so far.
    pub fn new_id(&self) -> CoreResult<HoldId> {
        #[cfg(feature = "testing")]
        if let Some(next) = self.next_sequential_id.get() {
            self.next_sequential_id.set(Some(next.wrapping_add(1)));
            return Ok(HoldId::from_bits(next));
        }
        loop {
            let bits = match self.seeded_ids.get() {
                Some(state) => {
                    let (high, state) = splitmix64(state);
                    let (low, state) = splitmix64(state);
                    self.seeded_ids.set(Some(state));
                    (u128::from(high) << 64) | u128::from(low)
                }
                None => {
                    let mut bytes = [0u8; 16];
                    getrandom::fill(&mut bytes)
                        .map_err(|error| internal(format!("no randomness: {error}")))?;
                    u128::from_le_bytes(bytes)
                }
            };
            let id = HoldId::from_bits(bits);
            if !self.live.contains_key(&id) && !self.ended.contains_key(&id) {
                return Ok(id);
            }
        }
    }

    /// Draws ids from a generator seeded with `seed` from now on (`None`: random again).
    pub fn seed_ids(&mut self, seed: Option<u64>) {
        self.seeded_ids.set(seed);
    }

    /// The live hold with this id.
    pub fn live(&self, id: HoldId) -> Option<&Hold> {
        self.live.get(&id)
    }

    /// How the hold with this id ended, if it is remembered.
    pub fn ended(&self, id: HoldId) -> Option<&EndedHold> {
        self.ended.get(&id)
    }

    /// Live holds (any order: callers must not base decisions on it).
    pub fn live_holds(&self) -> impl Iterator<Item = (HoldId, &Hold)> {
        self.live.iter().map(|(&id, hold)| (id, hold))
    }

    /// Live holds sorted by id: the order listings and snapshots use.
    pub fn live_holds_by_id(&self) -> Vec<(HoldId, &Hold)> {
        let mut holds: Vec<(HoldId, &Hold)> = self.live_holds().collect();
        holds.sort_unstable_by_key(|&(id, _)| id);
        holds
    }

    /// Remembered ended holds, oldest first.
    pub fn ended_in_order(&self) -> impl Iterator<Item = (HoldId, &EndedHold)> {
        self.ended_order
            .iter()
            .filter_map(|id| self.ended.get(id).map(|ended| (*id, ended)))
    }

    /// Remembers a hold that ended (used by `end` and by snapshot restore).
    pub fn remember(&mut self, id: HoldId, ended: EndedHold) {
        if self.ended_order.len() >= REMEMBERED_ENDED_HOLDS
            && let Some(oldest) = self.ended_order.pop_front()
        {
            self.ended.remove(&oldest);
        }
        self.ended.insert(id, ended);
        self.ended_order.push_back(id);
    }

    /// GPUs held by live holds of `owner`.
    pub fn held_by(&self, owner: Option<&str>) -> u64 {
        let key: Option<Arc<str>> = owner.map(Arc::from);
        self.held_by_owner.get(&key).copied().unwrap_or(0)
    }

    fn count_held(&mut self, owner: &Option<Arc<str>>, added: u64, removed: u64) {
        let held = self.held_by_owner.entry(owner.clone()).or_insert(0);
        *held = (*held + added).saturating_sub(removed);
        if *held == 0 {
            self.held_by_owner.remove(owner);
        }
    }

    /// How many holds are live.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// The live holds with GPUs on `node` and the GPUs each holds there, in the order they
    /// were made (callers must not decide on that order).
    pub fn holders_of(&self, node: NodeId) -> &[(HoldId, GpuSet)] {
        self.holders.get(node as usize).map_or(&[], Vec::as_slice)
    }

    /// The holds with GPUs on `node`, with the GPUs each holds there, sorted by id.
    pub fn holders_on(&self, node: NodeId) -> Vec<(HoldId, GpuSet)> {
        let mut holders = self.holders_of(node).to_vec();
        holders.sort_unstable();
        holders
    }

    /// The ids of the holds with GPUs on `node`, sorted, each once.
    pub fn hold_ids_on(&self, node: NodeId) -> Vec<HoldId> {
        let mut ids: Vec<HoldId> = self
            .holders_on(node)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.dedup();
        ids
    }

    /// The live holds whose GPUs differ from what they name (see `Hold::held_differs`).
    pub fn irregular(&self) -> &BTreeSet<HoldId> {
        &self.irregular
    }

    /// Keeps `irregular` right for hold `id` after a change to it (or its end).
    fn recheck(&mut self, id: HoldId) {
        if self.live.get(&id).is_some_and(Hold::held_differs) {
            self.irregular.insert(id);
        } else {
            self.irregular.remove(&id);
        }
    }

    fn add_holder(&mut self, node: NodeId, id: HoldId, gpus: GpuSet) {
        let slot = node as usize;
        if slot >= self.holders.len() {
            self.holders.resize_with(slot + 1, Vec::new);
        }
        self.holders[slot].push((id, gpus));
        self.changed.mark(node);
    }

    fn remove_holder(&mut self, node: NodeId, id: HoldId) {
        if let Some(holders) = self.holders.get_mut(node as usize) {
            holders.retain(|&(holder, _)| holder != id);
        }
        self.changed.mark(node);
    }

    /// The test-only failpoint: after the first node of a mutation has changed.
    #[cfg(feature = "testing")]
    fn failpoint(&self, step: usize) {
        if self.panic_mid_apply && step == 0 {
            panic!("failpoint mid-apply: a mutation stopped half-way");
        }
    }

    #[cfg(not(feature = "testing"))]
    fn failpoint(&self, _step: usize) {}

    /// Marks the hold's GPUs reserved on their nodes and records it.
    pub fn hold(&mut self, states: &mut NodeStates, changes: &mut Changes, id: HoldId, hold: Hold) {
        for (step, &(node, gpus)) in hold.gpus_by_node.iter().enumerate() {
            states.update(node, changes, |state| state.reserved |= gpus);
            self.add_holder(node, id, gpus);
            self.failpoint(step);
        }
        for (node, amounts) in &hold.resources_by_node {
            states.use_resources(*node, amounts, true, changes);
        }
        self.sharers
            .add(id, &hold.resources_by_node, &mut self.changed);
        self.count_held(&hold.owner, hold.gpu_count(), 0);
        self.expiries.insert(Expiry {
            at: hold.expires_at,
            id,
        });
        if let Some(link) = &hold.repair {
            let repairs = self.repairs.entry(link.allocation).or_default();
            if let Err(position) = repairs.binary_search(&id) {
                repairs.insert(position, id);
            }
        }
        self.live.insert(id, hold);
        self.recheck(id);
    }

    fn unlink_repair(&mut self, id: HoldId, link: &RepairLink) {
        if let Some(repairs) = self.repairs.get_mut(&link.allocation) {
            repairs.retain(|&repair| repair != id);
            if repairs.is_empty() {
                self.repairs.remove(&link.allocation);
            }
        }
    }

    /// Changes a live hold's priority.
    pub fn set_priority(&mut self, id: HoldId, priority: i32) {
        self.note_hold(id);
        if let Some(hold) = self.live.get_mut(&id) {
            hold.terms.priority = priority;
        }
    }

    /// Turns a reservation into an allocation at `now`; the GPUs stay held.
    pub fn commit(&mut self, states: &mut NodeStates, changes: &mut Changes, id: HoldId, now: f64) {
        self.note_hold(id);
        let Some(hold) = self.live.get_mut(&id) else {
            return;
        };
        if hold.state == HoldState::Committed {
            return;
        }
        hold.state = HoldState::Committed;
        hold.since = now;
        self.expiries.remove(&Expiry {
            at: hold.expires_at,
            id,
        });
        for &(node, gpus) in &hold.gpus_by_node {
            states.update(node, changes, |state| {
                state.reserved &= !gpus;
                state.allocated |= gpus;
            });
        }
    }

    /// Ends a live hold: its GPUs go back to the pool (unhealthy ones stay out of it).
    pub fn end(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        ending: Ending,
    ) {
        let Some(hold) = self.live.remove(&id) else {
            return;
        };
        self.irregular.remove(&id);
        self.expiries.remove(&Expiry {
            at: hold.expires_at,
            id,
        });
        for (step, &(node, gpus)) in hold.gpus_by_node.iter().enumerate() {
            states.update(node, changes, |state| match hold.state {
                HoldState::Reserved => state.reserved &= !gpus,
                HoldState::Committed => state.allocated &= !gpus,
            });
            self.remove_holder(node, id);
            self.failpoint(step);
        }
        for (node, amounts) in &hold.resources_by_node {
            states.use_resources(*node, amounts, false, changes);
        }
        self.sharers
            .remove(id, &hold.resources_by_node, &mut self.changed);
        self.count_held(&hold.owner, 0, hold.gpu_count());
        if let Some(link) = &hold.repair {
            self.unlink_repair(id, link);
        }
        let owner = hold.owner;
        self.remember(id, EndedHold { ending, owner });
        if hold.state == HoldState::Committed {
            // An allocation that ends takes its repair reservations with it (rolled back).
            for repair in self.repairs.remove(&id).unwrap_or_default() {
                self.end(states, changes, repair, Ending::RolledBack);
            }
        }
    }

    /// Drops `node` from an allocation before the node is removed: the GPUs there are gone
    /// with it, the rest stays allocated until `release`.
    pub fn detach_node(
        &mut self,
        states: &mut NodeStates,
        changes: &mut Changes,
        id: HoldId,
        node: NodeId,
    ) {
        self.note_hold(id);
        let Some(hold) = self.live.get_mut(&id) else {
            return;
        };
        let held_here = hold
            .gpus_by_node
            .iter()
            .filter(|&&(held_on, _)| held_on == node)
            .fold(GpuSet::EMPTY, |set, &(_, gpus)| set | gpus);
        hold.gpus_by_node
            .retain(|&mut (held_on, _)| held_on != node);
        for (_, amounts) in (hold.resources_by_node.iter()).filter(|(on, _)| *on == node) {
            states.use_resources(node, amounts, false, changes);
            hold.resources_detached = true;
        }
        hold.resources_by_node.retain(|(on, _)| *on != node);
        let (state, owner) = (hold.state, hold.owner.clone());
        self.sharers
            .remove(id, &[(node, Amounts::default())], &mut self.changed);
        states.update(node, changes, |node_state| match state {
            HoldState::Reserved => node_state.reserved &= !held_here,
            HoldState::Committed => node_state.allocated &= !held_here,
        });
        self.remove_holder(node, id);
        self.count_held(&owner, 0, u64::from(held_here.count()));
        self.recheck(id);
    }

    /// Checks the holders index against the live holds (for `check_invariants`).
    pub fn check_holders(&self) -> Result<(), String> {
        let mut expected: Vec<Vec<(HoldId, GpuSet)>> = vec![Vec::new(); self.holders.len()];
        for (&id, hold) in &self.live {
            for &(node, gpus) in &hold.gpus_by_node {
                let slot = expected
                    .get_mut(node as usize)
                    .ok_or_else(|| format!("hold {id} is not in the holders index"))?;
                slot.push((id, gpus));
            }
        }
        for (slot, expected) in expected.iter_mut().enumerate() {
            let mut actual = self.holders[slot].clone();
            actual.sort_unstable();
            expected.sort_unstable();
            if actual != *expected {
                return Err(format!("the holders index of node slot {slot} is stale"));
            }
        }
        let irregular: BTreeSet<HoldId> = (self.live.iter())
            .filter(|(_, hold)| hold.held_differs())
            .map(|(&id, _)| id)
            .collect();
        if irregular != self.irregular {
            return Err("the set of holds whose GPUs differ from their pods is stale".into());
        }
        self.sharers.check(&self.live)?;
        self.check_repairs()
    }

    /// Ends every reservation whose `expires_at <= now`.
    pub fn expire(&mut self, states: &mut NodeStates, changes: &mut Changes, now: f64) {
        while self.expiries.first().is_some_and(|next| next.at <= now) {
            if let Some(next) = self.expiries.pop_first() {
                self.end(states, changes, next.id, Ending::Expired);
            }
        }
    }
}

/// One step of splitmix64: the output and the next state (Steele, Lea and Flood, 2014).
fn splitmix64(state: u64) -> (u64, u64) {
    let next = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = next;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31), next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_ids_are_fresh() {
        let ledger = Ledger::default();
        let id = ledger.new_id().unwrap();
        assert_ne!(ledger.new_id().unwrap(), id);
    }
}
