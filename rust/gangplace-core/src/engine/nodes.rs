//! Updating a node in place (docs/transactions.md "Node updates"): its labels at any time; its topology,
//! GPU count and GPU groups only while no hold sits on it, by adding it again as changed. Removing
//! a node, as a node failure would.

use super::Engine;
use crate::error::{CoreResult, texts};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Ending, HoldState};
use crate::model::Taint;
use crate::model::checked_taints;
use crate::state::{Changes, NodeState};
use crate::topology::NodeSpec;
use crate::topology::edit::validate_labels;

/// What `update_node` changes; `None` leaves that part as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeUpdate {
    /// Every label of the node, replacing the old ones.
    pub labels: Option<Vec<(String, String)>>,
    /// Level name -> domain name, for exactly the cluster's levels.
    pub topology: Option<Vec<(String, String)>>,
    /// The GPU count.
    pub gpus: Option<i64>,
    /// Intra-node levels and each GPU's group ids.
    pub gpu_topology: Option<(Vec<String>, Vec<Vec<u32>>)>,
    /// Every resource besides GPUs, replacing the old ones (docs/resources.md "Node resources").
    pub resources: Option<Vec<(String, i64)>>,
    /// Every taint of the node, replacing the old ones (any time, like labels: N1).
    pub taints: Option<Vec<Taint>>,
}

impl Engine {
    /// Removes a node, as a node failure would: every reservation touching it is revoked
    /// (all its GPUs freed), every allocation touching it loses the GPUs there and stays
    /// until released. Returns the ids of all those holds (revoked reservations and
    /// allocations alike), sorted.
    pub fn remove_node(&mut self, name: &str, now: f64) -> CoreResult<Vec<HoldId>> {
        self.reclaim(now);
        let id = self.topology.known_node(name)?;
        let holders = self.holds_touching(id);
        let mut changes = Changes::new();
        for &holder in &holders {
            let (states, ledger) = (&mut self.states, &mut self.ledger);
            match ledger.live(holder).map(|hold| hold.state) {
                Some(HoldState::Reserved) => {
                    ledger.end(states, &mut changes, holder, Ending::Revoked);
                }
                Some(HoldState::Committed) => {
                    ledger.detach_node(states, &mut changes, holder, id);
                    let dropped =
                        ledger.drop_spares(states, &mut changes, holder, (id, name), GpuSet::ALL);
                    self.spares_dropped(&mut changes, holder, &dropped);
                }
                None => {}
            }
        }
        self.apply(&changes);
        self.capacity.node_removed(&self.topology, &self.states, id);
        self.topology.remove_node(id);
        self.victims.topology_changed();
        self.states.vacate(id);
        Ok(holders)
    }

    /// The live holds with GPUs on node `name` (docs/transactions.md "Transactions", `holds_on`): each
    /// once, by id, with the GPUs it holds there (spares included) or shares of which it holds
    /// (docs/resources.md "Fractions of a GPU"). Expired reservations are reclaimed first.
    pub fn holds_on(&mut self, name: &str, now: f64) -> CoreResult<Vec<(HoldId, GpuSet)>> {
        self.reclaim(now);
        let id = self.topology.known_node(name)?;
        let mut holders = self.ledger.holders_of(id).to_vec();
        holders.extend_from_slice(self.ledger.sharers_of(id));
        holders.sort_unstable();
        let mut merged: Vec<(HoldId, GpuSet)> = Vec::new();
        for (hold, gpus) in holders {
            match merged.last_mut() {
                Some((last, held)) if *last == hold => *held |= gpus,
                _ => merged.push((hold, gpus)),
            }
        }
        Ok(merged)
    }

    /// Updates a node (docs/transactions.md "Node updates", N1-N3). On any error nothing changes.
    pub fn update_node(&mut self, name: &str, update: NodeUpdate, now: f64) -> CoreResult<()> {
        self.reclaim(now);
        let id = self.topology.known_node(name)?;
        let state = self.states.get(id);
        let unhealthy: Vec<i64> = state
            .unhealthy
            .indices()
            .into_iter()
            .map(i64::from)
            .collect();
        let cordoned = state.cordoned;
        let current = self.topology.spec_of(id, unhealthy);
        let resources = match update.resources.clone() {
            Some(named) => Some(self.topology.resources().check(name, named)?),
            None => None,
        };
        let changed = changed_spec(&current, update);
        let structural = changed.gpus != current.gpus
            || sorted(&changed.topology) != sorted(&current.topology)
            || changed.gpu_topology != current.gpu_topology;
        if structural {
            let holders = self.holds_touching(id);
            if !holders.is_empty() {
                return Err(texts::node_holds(name, holders.len()));
            }
            return self.readd(id, current, changed, cordoned);
        }
        validate_labels(&changed.labels)?;
        crate::topology::edit::checked_gpus(&changed)?; // 0 GPUs keep some resource
        let taints = checked_taints(changed.taints.clone())?;
        if let Some(resources) = resources {
            // Capacities may drop below what running pods use: the node is then full for
            // those resources until they end (Kubernetes keeps such pods running too).
            self.topology.set_resources(id, &resources);
            self.capacity.drop_shapes(); // counted with the old capacities
            let names = self.topology.resources().names().len();
            let in_use = self.states.resource_use_mut();
            in_use.sync_names(names);
            in_use.capacity_changed(id, self.topology.resources().capacity(id));
        }
        self.topology.set_labels(id, changed.labels);
        if taints != self.topology.node(id).taints {
            self.topology.set_taints(id, taints);
            let tainted = self.topology.node(id).tainted();
            let mut changes = Changes::new();
            self.states
                .update(id, &mut changes, |state| state.tainted = tainted);
            self.apply(&changes);
        }
        self.capacity.labels_changed();
        Ok(())
    }

    /// Replaces node `id` (which holds nothing) by `changed`; on error puts `current` back.
    fn readd(
        &mut self,
        id: NodeId,
        current: NodeSpec,
        changed: NodeSpec,
        cordoned: bool,
    ) -> CoreResult<()> {
        let name = current.name.clone();
        self.capacity.node_removed(&self.topology, &self.states, id);
        self.topology.remove_node(id);
        self.victims.topology_changed();
        self.states.vacate(id);
        let result = self.add_node(changed);
        if result.is_err() {
            // The node was valid as it was, and its slot and name are free again.
            self.add_node(current)?;
        }
        let id = self.topology.known_node(&name)?;
        let mut changes = Changes::new();
        self.states
            .update(id, &mut changes, |state: &mut NodeState| {
                state.cordoned = cordoned
            });
        self.apply(&changes);
        result
    }
}

/// `current` with the parts `update` gives; unhealthy GPUs past a smaller count are dropped.
fn changed_spec(current: &NodeSpec, update: NodeUpdate) -> NodeSpec {
    let mut changed = current.clone();
    if let Some(labels) = update.labels {
        changed.labels = labels;
    }
    if let Some(topology) = update.topology {
        changed.topology = topology;
    }
    if let Some(gpus) = update.gpus {
        changed.gpus = gpus;
        changed.unhealthy.retain(|&gpu| gpu < gpus);
    }
    if let Some(groups) = update.gpu_topology {
        changed.gpu_topology = Some(groups);
    }
    if let Some(resources) = update.resources {
        changed.resources = resources;
    }
    if let Some(taints) = update.taints {
        changed.taints = taints;
    }
    changed
}

fn sorted(pairs: &[(String, String)]) -> Vec<(String, String)> {
    let mut pairs = pairs.to_vec();
    pairs.sort();
    pairs
}
