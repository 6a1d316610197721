//! Adoption: recording work that is already running (README, "Adopting running work").
//!
//! A scheduler that starts up finds pods already bound to nodes; a Slurm controller finds
//! `GresUsed`. [`Engine::adopt`] turns them into one ordinary allocation: no placement rule
//! applies (the world already decided), but every GPU must exist, be free and healthy, and
//! no GPU may be named twice; otherwise nothing changes.

use std::sync::Arc;

use crate::error::{CoreError, CoreResult, internal, invalid, texts};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::HoldState;
use crate::limits::MAX_GPUS_PER_NODE;
use crate::model::{AdoptedPod, Allocation, Placement, PodPlacement, Terms};
use crate::state::Changes;

use super::Engine;
use super::transactions::{NewHold, Owner, allocation_of, check_owner, gpus_by_node, held_gpus};

impl Engine {
    /// Records `pods` (already running) as one allocation of `owner` with `terms`.
    ///
    /// Cordoned nodes are accepted (work runs there). Errors, with nothing changed:
    /// `InvalidRequest` (no pods, a GPU index or count out of range), `UnknownNode`,
    /// `Conflict` (a GPU held, unhealthy, named twice, or too few free for a count),
    /// `LimitExceeded` (the owner's cap).
    pub fn adopt(
        &mut self,
        pods: &[AdoptedPod],
        owner: Owner<'_>,
        terms: Terms,
        now: f64,
    ) -> CoreResult<Allocation> {
        check_owner(owner)?;
        self.reclaim(now);
        let (taken, held) = self.adopted_pods(pods)?;
        self.check_cap(owner, held_gpus(&held))?;
        let id = self.new_ids(1)?[0];
        let placement = Arc::new(self.adopted_placement(&taken));
        let new = NewHold {
            placement,
            expires_at: now,
            owner,
            terms,
            since: now,
            request: None,
            roles: None,
        };
        let mut changes = Changes::new();
        self.hold_into(&mut changes, id, held, new);
        self.ledger.commit(&mut self.states, &mut changes, id, now);
        self.apply(&changes);
        let hold = self.ledger.live(id);
        let hold = hold.ok_or_else(|| internal("an adopted hold vanished"))?;
        Ok(allocation_of(&self.topology, &self.states, id, hold))
    }

    /// Adds `pods` (already running) to allocation `id` as new ranks after its others
    /// (README "Adopting running work", `into`): the same checks as [`Engine::adopt`], and
    /// only for an allocation placed without a request (adopted, or `reserve(placement)`);
    /// `change` replaces the terms it names. Nothing changes on any error.
    pub fn adopt_into(
        &mut self,
        id: HoldId,
        pods: &[AdoptedPod],
        caller: Owner<'_>,
        change: TermsChange,
        now: f64,
    ) -> CoreResult<Allocation> {
        check_owner(caller)?;
        self.reclaim(now);
        match self.visible(id, caller) {
            (Some(HoldState::Committed), _) => {}
            (Some(HoldState::Reserved), _) => {
                return Err(CoreError::ReservationError(format!(
                    "cannot adopt into {id}: it is not committed"
                )));
            }
            (None, ending) => return Err(Self::ended_error(id, ending, "adopt into")),
        }
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live hold vanished"))?;
        if hold.request.is_some() || hold.roles.is_some() {
            return Err(invalid(format!(
                "allocation {id} was placed for a request: only adopted work (adopt, \
                 reserve(placement)) takes more pods"
            )));
        }
        let terms = change.applied_to(hold.terms)?;
        let (taken, held) = self.adopted_pods(pods)?;
        self.check_cap(hold.owner.as_deref(), held_gpus(&held))?;
        let placement = Arc::new(self.grown_placement(&hold.placement, &taken));
        let mut changes = Changes::new();
        self.ledger.add_pods(
            &mut self.states,
            &mut changes,
            id,
            (placement, terms),
            &held,
        );
        self.apply(&changes);
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live hold vanished"))?;
        Ok(allocation_of(&self.topology, &self.states, id, hold))
    }

    /// `old` with the pods of `taken` after its own (ranked by rule 6 among themselves), at
    /// the finest level whose one domain holds the old domain and every new pod's node.
    fn grown_placement(&self, old: &Placement, taken: &[(NodeId, GpuSet)]) -> Placement {
        let added = self.adopted_placement(taken);
        let common = (old.domain.iter())
            .zip(&added.domain)
            .take_while(|(a, b)| a == b)
            .count();
        let depth = common.min(self.topology.node_depth());
        let mut grown = old.clone();
        grown.pods.extend(added.pods);
        grown.domain.truncate(common);
        grown.level = self.topology.level_name(depth).to_owned();
        grown
    }

    /// Each pod's node and GPUs, in order, and the GPUs per node; every check of `adopt`.
    #[allow(clippy::type_complexity)] // two plain lists of (node, GPUs)
    fn adopted_pods(
        &self,
        pods: &[AdoptedPod],
    ) -> CoreResult<(Vec<(NodeId, GpuSet)>, Vec<(NodeId, GpuSet)>)> {
        if pods.is_empty() {
            return Err(invalid("adopt needs at least one pod"));
        }
        let mut taken: Vec<(NodeId, GpuSet)> = Vec::with_capacity(pods.len());
        for pod in pods {
            let (node, gpus) = self.adopted_gpus(pod, &taken)?;
            taken.push((node, gpus));
        }
        let held = gpus_by_node(taken.iter().copied()).ok_or_else(texts::adopt_overlap)?;
        Ok((taken, held))
    }

    /// The node and GPUs of one adopted pod, given the GPUs earlier pods of the call took.
    fn adopted_gpus(
        &self,
        pod: &AdoptedPod,
        taken: &[(NodeId, GpuSet)],
    ) -> CoreResult<(NodeId, GpuSet)> {
        let name = pod.node();
        let node = self
            .topology
            .node_id(name)
            .ok_or_else(|| CoreError::UnknownNode(name.to_owned()))?;
        let state = self.states.get(node);
        let earlier = taken
            .iter()
            .filter(|&&(other, _)| other == node)
            .fold(GpuSet::EMPTY, |all, &(_, gpus)| all | gpus);
        let gpus = match *pod {
            AdoptedPod::Gpus { gpus, .. } => {
                if gpus.is_empty() {
                    return Err(invalid(format!("a pod on node {name:?} names no GPUs")));
                }
                if let Some(gpu) = (gpus & !state.gpus).lowest() {
                    return Err(invalid(format!(
                        "node {name:?} has {} GPUs (0 to {}); GPU {gpu} is not one of them",
                        state.gpus.count(),
                        state.gpus.count().saturating_sub(1)
                    )));
                }
                gpus
            }
            AdoptedPod::Count { count, .. } => {
                if count == 0 || count > MAX_GPUS_PER_NODE {
                    return Err(invalid(format!(
                        "a pod on node {name:?} must take 1 to {MAX_GPUS_PER_NODE} GPUs, \
                         not {count}"
                    )));
                }
                let gpus = (state.free() & !earlier).lowest_n(count);
                if gpus.count() < count {
                    let free = (state.free() & !earlier).count();
                    return Err(texts::adopt_short(name, free, count));
                }
                gpus
            }
        };
        if let Some(gpu) = (gpus & earlier).lowest() {
            return Err(texts::adopt_gpu_twice(gpu, name));
        }
        if let Some(gpu) = (gpus & !state.free()).lowest() {
            return Err(texts::adopt_gpu_busy(
                gpu,
                name,
                state.unhealthy.contains(gpu),
            ));
        }
        Ok((node, gpus))
    }

    /// The placement of adopted pods: ranked by rule 6, at the finest level whose one domain
    /// holds every pod's node.
    fn adopted_placement(&self, taken: &[(NodeId, GpuSet)]) -> Placement {
        let mut ranked: Vec<(Vec<&str>, u32, NodeId, GpuSet)> = taken
            .iter()
            .map(|&(node, gpus)| {
                let path = self.topology.node_path(node);
                (path, gpus.lowest().unwrap_or(0), node, gpus)
            })
            .collect();
        ranked.sort();
        let first = &ranked[0].0;
        let common = ranked.iter().fold(first.len(), |common, (path, ..)| {
            first
                .iter()
                .zip(path)
                .take(common)
                .take_while(|(a, b)| a == b)
                .count()
        });
        // A node path is the domain path plus the node's name: all pods on one node share it
        // whole (the node level); otherwise the common prefix is a domain path.
        let depth = common.min(self.topology.node_depth());
        let domain = first[..common]
            .iter()
            .map(|part| (*part).to_owned())
            .collect();
        Placement {
            pods: ranked
                .iter()
                .map(|&(_, _, node, gpus)| PodPlacement {
                    node: Arc::clone(&self.topology.node(node).name),
                    gpus,
                    affinity: self.affinity_of(node, gpus),
                })
                .collect(),
            level: self.topology.level_name(depth).to_owned(),
            domain,
            slices: Vec::new(),
            groups: Vec::new(),
            spares: Vec::new(),
        }
    }
}

/// What `adopt(into=...)` changes of an allocation's terms; `None` keeps that part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TermsChange {
    /// The new priority.
    pub priority: Option<i64>,
    /// Whether it may be preempted.
    pub preemptible: Option<bool>,
    /// Whether defragmentation may move it.
    pub movable: Option<bool>,
}

impl TermsChange {
    /// `terms` with the named parts replaced (the priority checked as everywhere).
    pub fn applied_to(self, terms: Terms) -> CoreResult<Terms> {
        Terms::new(
            self.priority.unwrap_or(i64::from(terms.priority)),
            self.preemptible.unwrap_or(terms.preemptible),
            self.movable.unwrap_or(terms.movable),
        )
    }
}
