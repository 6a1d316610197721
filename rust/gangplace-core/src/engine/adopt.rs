//! Adoption: recording work that is already running (docs/transactions.md "Adopting running work").
//!
//! A scheduler that starts up finds pods already bound to nodes; a Slurm controller finds
//! `GresUsed`. [`Engine::adopt`] turns them into one ordinary allocation: no placement rule
//! applies (the world already decided), but every GPU must exist, be free and healthy, and
//! no GPU may be named twice; otherwise nothing changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{CoreError, CoreResult, internal, invalid, texts};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::HoldState;
use crate::limits::MAX_GPUS_PER_NODE;
use crate::model::{AdoptedPod, Allocation, Placement, PodPlacement, Terms};
use crate::resources::Amounts;
use crate::shares::checked_milli;
use crate::state::Changes;

use super::Engine;
use super::transactions::{NewHold, Owner, allocation_of, check_owner, gpus_by_node, held_gpus};

/// What `adopt` records: the pods, what they ask besides GPUs, and the share of one GPU each
/// uses when they run on part of one.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdoptedPods<'a> {
    /// The pods, in the order given.
    pub pods: &'a [AdoptedPod],
    /// What they ask besides GPUs: empty, or one `(name, quantity)` list per pod (docs/resources.md
    /// "Node resources").
    pub asks: &'a [Vec<(String, i64)>],
    /// Thousandths of one GPU each pod uses (docs/resources.md "Fractions of a GPU"); `None`: whole
    /// GPUs.
    pub gpu_milli: Option<i64>,
}

impl Engine {
    /// Records `pods` (already running) as one allocation of `owner` with `terms`.
    ///
    /// Cordoned nodes are accepted (work runs there). Errors, with nothing changed:
    /// `InvalidRequest` (no pods, a GPU index or count out of range), `UnknownNode`,
    /// `Conflict` (a GPU held, unhealthy, named twice, or too few free for a count; for
    /// fractions, a GPU without room for its share), `LimitExceeded` (the owner's cap).
    pub fn adopt(
        &mut self,
        given: AdoptedPods<'_>,
        owner: Owner<'_>,
        terms: Terms,
        now: f64,
    ) -> CoreResult<Allocation> {
        check_owner(owner)?;
        let milli = given.gpu_milli.map(checked_milli).transpose()?;
        self.reclaim(now);
        let (taken, held) = match milli {
            // Fractional pods hold shares, not GPUs (docs/resources.md "Fractions of a GPU").
            Some(milli) => (self.adopted_shares(given.pods, milli)?, Vec::new()),
            None => self.adopted_pods(given.pods)?,
        };
        let asks = self.adopted_asks(given.asks, &taken)?;
        self.check_cap(owner, held_gpus(&held))?;
        let id = self.new_ids(1)?[0];
        let (mut placement, order) = self.adopted_placement(&taken);
        placement.gpu_milli = milli;
        let pod_resources = ranked_asks(asks, &order);
        let placement = Arc::new(placement);
        let new = NewHold {
            placement,
            expires_at: now,
            owner,
            terms,
            since: now,
            request: None,
            roles: None,
            pod_resources: Some(pod_resources),
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
    /// (docs/transactions.md "Adopting running work", `into`): the same checks as [`Engine::adopt`], and
    /// only for an allocation placed without a request (adopted, or `reserve(placement)`);
    /// pods of a fractional allocation use its share each (docs/resources.md "Fractions of a
    /// GPU"); `change` replaces the terms it names. Nothing changes on any error.
    pub fn adopt_into(
        &mut self,
        id: HoldId,
        given: AdoptedPods<'_>,
        caller: Owner<'_>,
        change: TermsChange,
        now: f64,
    ) -> CoreResult<Allocation> {
        check_owner(caller)?;
        let milli = given.gpu_milli.map(checked_milli).transpose()?;
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
        same_share(id, hold.placement.gpu_milli, milli)?;
        if hold.request.is_some() || hold.roles.is_some() {
            return Err(invalid(format!(
                "allocation {id} was placed for a request: only adopted work (adopt, \
                 reserve(placement)) takes more pods"
            )));
        }
        let terms = change.applied_to(hold.terms)?;
        let (taken, held) = match milli {
            // Shares, not GPUs (docs/resources.md "Fractions of a GPU"): the pods' own GPUs.
            Some(milli) => (self.adopted_shares(given.pods, milli)?, Vec::new()),
            None => self.adopted_pods(given.pods)?,
        };
        let asks = self.adopted_asks(given.asks, &taken)?;
        self.check_cap(hold.owner.as_deref(), held_gpus(&held))?;
        let (placement, order) = self.grown_placement(&hold.placement, &taken);
        let pod_resources = grown_asks(hold, asks, &order);
        let placement = Arc::new(placement);
        let mut changes = Changes::new();
        self.ledger.add_pods(
            &mut self.states,
            &mut changes,
            id,
            (placement, terms),
            &held,
        );
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live hold vanished"))?;
        let member = |node: NodeId| {
            super::resources::holds_on(hold, node) || taken.iter().any(|&(on, _)| on == node)
        };
        let by_node = self.resources_by_node(&hold.placement, &pod_resources, &hold.ended, &member);
        let states = &mut self.states;
        (self.ledger).set_resources(states, &mut changes, id, pod_resources, by_node);
        self.apply(&changes);
        let hold = self
            .ledger
            .live(id)
            .ok_or_else(|| internal("a live hold vanished"))?;
        Ok(allocation_of(&self.topology, &self.states, id, hold))
    }

    /// `old` with the pods of `taken` after its own (ranked by rule 6 among themselves), at
    /// the finest level whose one domain holds the old domain and every new pod's node.
    fn grown_placement(
        &self,
        old: &Placement,
        taken: &[(NodeId, GpuSet)],
    ) -> (Placement, Vec<usize>) {
        let (added, order) = self.adopted_placement(taken);
        let common = (old.domain.iter())
            .zip(&added.domain)
            .take_while(|(a, b)| a == b)
            .count();
        let depth = common.min(self.topology.node_depth());
        let mut grown = old.clone(); // keeps the share per pod of a fractional allocation
        grown.pods.extend(added.pods);
        grown.domain.truncate(common);
        grown.level = self.topology.level_name(depth).to_owned();
        (grown, order)
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
                if let Some(gpu) = (gpus & !state.gpus).lowest() {
                    return Err(not_one_of(name, state.gpus, gpu));
                }
                gpus
            }
            AdoptedPod::Count { count, .. } => {
                if count > MAX_GPUS_PER_NODE {
                    return Err(invalid(format!(
                        "a pod on node {name:?} must take 0 to {MAX_GPUS_PER_NODE} GPUs, \
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
    /// holds every pod's node; and for each rank, the pod's position in `taken`.
    fn adopted_placement(&self, taken: &[(NodeId, GpuSet)]) -> (Placement, Vec<usize>) {
        let mut ranked: Vec<(Vec<&str>, u32, NodeId, GpuSet, usize)> = (taken.iter())
            .enumerate()
            .map(|(position, &(node, gpus))| {
                let path = self.topology.node_path(node);
                (path, gpus.lowest().unwrap_or(0), node, gpus, position)
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
        let order = ranked.iter().map(|entry| entry.4).collect();
        let placement = Placement {
            gpu_milli: None,
            pods: ranked
                .iter()
                .map(|&(_, _, node, gpus, _)| PodPlacement {
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
        };
        (placement, order)
    }

    /// What adopted pods ask besides GPUs (empty: nothing; else one list per pod, names
    /// known), refused with `Conflict` when a node's free resources do not hold them; a pod
    /// without GPUs must ask some (docs/resources.md "Node resources").
    fn adopted_asks(
        &self,
        asks: &[Vec<(String, i64)>],
        taken: &[(NodeId, GpuSet)],
    ) -> CoreResult<Vec<Amounts>> {
        if !asks.is_empty() && asks.len() != taken.len() {
            return Err(invalid(format!(
                "adopt got {} pods but resources for {}",
                taken.len(),
                asks.len()
            )));
        }
        let names = self.topology.resources().names();
        let mut amounts = Vec::with_capacity(asks.len());
        let mut per_node: BTreeMap<NodeId, Amounts> = BTreeMap::new();
        for (index, &(node, gpus)) in taken.iter().enumerate() {
            let ask = match asks.get(index) {
                Some(ask) => {
                    let mut checked =
                        crate::resources::checked_named("an adopted pod", ask.clone())?;
                    checked.retain(|&(_, quantity)| quantity > 0);
                    names.resolve(&checked)?
                }
                None => Amounts::none(),
            };
            if gpus.is_empty() && ask.is_empty() {
                return Err(invalid(format!(
                    "a pod on node {:?} takes no GPUs and asks no resources: there is nothing \
                     to hold",
                    self.topology.node(node).name
                )));
            }
            let sum = per_node.entry(node).or_default();
            *sum = sum.plus(&ask);
            amounts.push(ask);
        }
        // The first short node by name, as the reference reports it (node ids follow the
        // order nodes were added in, not their names).
        let mut per_node: Vec<(NodeId, Amounts)> = per_node.into_iter().collect();
        per_node.sort_by(|a, b| {
            self.topology
                .node(a.0)
                .name
                .cmp(&self.topology.node(b.0).name)
        });
        for (node, asked) in per_node {
            let capacity = self.topology.resources().capacity(node);
            let free = capacity.minus(self.states.resource_use().used(node));
            if !asked.within(&free) {
                return Err(texts::adopt_resources_short(
                    &self.topology.node(node).name,
                    &names.named(&free),
                    &names.named(&asked),
                ));
            }
        }
        Ok(if asks.is_empty() { Vec::new() } else { amounts })
    }
}

/// `InvalidRequest`: an adopted pod names GPU `gpu`, which node `name` (GPUs `gpus`) lacks.
pub(super) fn not_one_of(name: &str, gpus: GpuSet, gpu: u32) -> CoreError {
    invalid(format!(
        "node {name:?} has {} GPUs (0 to {}); GPU {gpu} is not one of them",
        gpus.count(),
        gpus.count().saturating_sub(1)
    ))
}

/// `InvalidRequest` unless pods adopted into allocation `id` use the share per pod its own
/// pods use (`held`; `None`: whole GPUs), as `given`: a placement has one share per pod
/// (docs/resources.md "Fractions of a GPU").
fn same_share(id: HoldId, held: Option<u16>, given: Option<u16>) -> CoreResult<()> {
    match (held, given) {
        (held, given) if held == given => Ok(()),
        (Some(held), _) => Err(invalid(format!(
            "allocation {id}'s pods use {held} thousandths of a GPU each: pods adopted into it \
             must give gpu_milli={held} (docs/resources.md \"Fractions of a GPU\")"
        ))),
        (None, _) => Err(invalid(format!(
            "allocation {id} holds whole GPUs: pods adopted into it take whole GPUs, without \
             gpu_milli (docs/resources.md \"Fractions of a GPU\")"
        ))),
    }
}

/// Adopted pods' asks in rank order (`order[rank]`: the pod's position as given).
fn ranked_asks(asks: Vec<Amounts>, order: &[usize]) -> Arc<[Amounts]> {
    if asks.iter().all(Amounts::is_empty) {
        return Arc::from(Vec::new());
    }
    Arc::from(order.iter().map(|&at| asks[at].clone()).collect::<Vec<_>>())
}

/// An adopted allocation's asks once `asks` (new pods, in `order`) are added after its own.
fn grown_asks(hold: &crate::ledger::Hold, asks: Vec<Amounts>, order: &[usize]) -> Arc<[Amounts]> {
    let added = ranked_asks(asks, order);
    if added.is_empty() && hold.pod_resources.is_empty() {
        return added;
    }
    let old_pods = hold.placement.pods.len();
    let mut all: Vec<Amounts> = match hold.pod_resources.len() {
        0 => vec![Amounts::none(); old_pods],
        1 => vec![hold.pod_resources[0].clone(); old_pods],
        _ => hold.pod_resources.to_vec(),
    };
    match added.len() {
        0 => all.extend(std::iter::repeat_n(Amounts::none(), order.len())),
        _ => all.extend(added.iter().cloned()),
    }
    Arc::from(all)
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
