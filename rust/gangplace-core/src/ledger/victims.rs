//! The kept index of preemption (the ledger's, read by [`crate::preemption`]) (docs/preemption.md "How a plan finds its set"): per node and
//! per domain, a [`Summary`] of the allocations there that could ever be candidates, kept
//! from the ledger's list of changed nodes, so that a plan reads bounds per domain and visits
//! only the allocations of the domains it considers ([`crate::search::removal`]'s descent).

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::{Hold, HoldState, Ledger};
use crate::ids::{DomainId, GpuSet, HoldId, NodeId};
use crate::search::Item;
use crate::search::removal::{Summaries, Summary};
use crate::shares::WHOLE_GPU_MILLI;
use crate::topology::{Topology, Walked};

/// Whether `hold` could be a victim of some preemption (P2, whatever the request): a
/// committed, preemptible allocation, of whole GPUs or shares (docs/preemption.md P8).
fn summed(hold: &Hold) -> bool {
    hold.state == HoldState::Committed && hold.terms.preemptible
}

/// What the index sums up of `hold`: its (thousandths held, GPUs held or shared), in total.
fn weight(hold: &Hold) -> (u64, u64) {
    match hold.placement.gpu_milli {
        None => (hold.gpu_count() * WHOLE_GPU_MILLI, hold.gpu_count()),
        Some(_) => hold.shares_held(),
    }
}

/// The live holds with GPUs or shares on `node`, with those GPUs.
fn touching(ledger: &Ledger, node: NodeId) -> impl Iterator<Item = (HoldId, GpuSet)> + '_ {
    let holders = ledger.holders_of(node).iter();
    holders.chain(ledger.sharers_of(node)).copied()
}

/// Summaries per node slot and per domain slot; rebuilt whole after the topology changes,
/// re-read node by node (and up their domains) after holds change.
#[derive(Debug, Default, Clone)]
pub(crate) struct VictimIndex {
    nodes: Vec<Summary>,
    /// Per node slot: the GPUs each allocation summed up there holds on the node, with its
    /// priority, most GPUs first.
    node_inside: Vec<NodeInside>,
    domains: Vec<Summary>,
    /// Per domain slot, once a plan asked: the GPUs each allocation summed up there has
    /// inside the domain, with its priority, most GPUs first (`None`: not made, or dropped by
    /// a change under it).
    inside: RefCell<Vec<Option<Vec<Inside>>>>,
    /// Whether the summaries match the topology (false after a node is added or removed).
    built: bool,
}

/// The index as a plan reads it: with the ledger and the topology, to make the GPUs inside
/// a domain when first asked.
pub(crate) struct KeptBounds<'a> {
    index: &'a VictimIndex,
    topology: &'a Topology,
    ledger: &'a Ledger,
}

impl Summaries for KeptBounds<'_> {
    fn node(&self, node: NodeId) -> Summary {
        self.index.node(node)
    }

    fn domain(&self, domain: DomainId) -> Summary {
        self.index.domain(domain)
    }

    fn fewest_reaching(&self, item: Item, lacking: u64, below: i32) -> Option<u64> {
        match item {
            Item::Node(node) => {
                let on_node = self.index.node_inside.get(node as usize);
                let held = on_node.map_or(&[][..], |held| &held[..]);
                fewest_reaching(held.iter().copied(), lacking, below)
            }
            Item::Domain(domain) => self.with_inside(domain, |held| {
                fewest_reaching(held.iter().copied(), lacking, below)
            }),
        }
    }

    fn touching(&self, item: Item, below: i32) -> usize {
        let count = |held: &[Inside]| held.iter().filter(|&&(_, p)| p < below).count();
        match item {
            Item::Node(node) => {
                (self.index.node_inside.get(node as usize)).map_or(0, |held| count(held))
            }
            Item::Domain(domain) => self.with_inside(domain, count),
        }
    }
}

impl KeptBounds<'_> {
    /// `read` of the GPUs each allocation summed up in `domain` has inside it, most first
    /// (made and kept when first asked).
    fn with_inside<R>(&self, domain: DomainId, read: impl FnOnce(&[Inside]) -> R) -> R {
        let mut cache = self.index.inside.borrow_mut();
        let slot = domain as usize;
        if cache.len() <= slot {
            cache.resize(slot + 1, None);
        }
        let gpus = cache[slot]
            .get_or_insert_with(|| inside(self.ledger, &self.topology.nodes_under(domain)));
        read(gpus)
    }
}

/// GPUs an allocation has inside a node or domain, and its priority.
type Inside = (u32, i32);

/// The fewest of `most_first` (most GPUs first) of a priority below `below` whose GPUs reach
/// `lacking` together (`None`: all of them do not).
fn fewest_reaching(
    most_first: impl Iterator<Item = Inside>,
    lacking: u64,
    below: i32,
) -> Option<u64> {
    let (mut sum, mut taken) = (0u64, 0u64);
    for (gpus, _) in most_first.filter(|&(_, priority)| priority < below) {
        if sum >= lacking {
            return Some(taken);
        }
        sum += u64::from(gpus);
        taken += 1;
    }
    (sum >= lacking).then_some(taken)
}

/// The GPUs each allocation that could be a victim holds or shares on `nodes`, with its
/// priority, most GPUs first.
fn inside(ledger: &Ledger, nodes: &[NodeId]) -> Vec<Inside> {
    let mut held: Vec<(HoldId, Inside)> = Vec::new();
    for &node in nodes {
        for (id, gpus) in touching(ledger, node) {
            if let Some(hold) = ledger.live(id).filter(|hold| summed(hold)) {
                held.push((id, (gpus.count(), hold.terms.priority)));
            }
        }
    }
    held.sort_unstable_by_key(|&(id, _)| id);
    let mut inside: Vec<Inside> = (held.chunk_by(|a, b| a.0 == b.0))
        .map(|run| (run.iter().map(|&(_, (gpus, _))| gpus).sum(), run[0].1.1))
        .collect();
    inside.sort_unstable_by(|a, b| b.cmp(a));
    inside
}

/// GPUs and priority per allocation on one node, most GPUs first.
type NodeInside = smallvec::SmallVec<[Inside; 4]>;

/// The summary of the holds on `node`, and the GPUs each holds there with its priority,
/// most GPUs first.
fn node_summary(ledger: &Ledger, node: NodeId) -> (Summary, NodeInside) {
    let mut summary = Summary::default();
    let mut inside = NodeInside::new();
    for (id, gpus) in touching(ledger, node) {
        if let Some(hold) = ledger.live(id).filter(|hold| summed(hold)) {
            let shares = hold.placement.gpu_milli.is_some();
            summary.add(hold.terms.priority, weight(hold), shares);
            inside.push((gpus.count(), hold.terms.priority));
        }
    }
    inside.sort_unstable_by(|a, b| b.cmp(a));
    (summary, inside)
}

impl VictimIndex {
    /// A node's summary.
    fn node(&self, node: NodeId) -> Summary {
        self.nodes.get(node as usize).copied().unwrap_or_default()
    }

    /// A domain's summary.
    fn domain(&self, domain: DomainId) -> Summary {
        self.domains
            .get(domain as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The index as a plan reads it.
    pub(crate) fn bounds<'a>(
        &'a self,
        topology: &'a Topology,
        ledger: &'a Ledger,
    ) -> KeptBounds<'a> {
        KeptBounds {
            index: self,
            topology,
            ledger,
        }
    }

    /// Marks the summaries stale: the topology changed (a node added or removed).
    pub(crate) fn topology_changed(&mut self) {
        self.built = false;
    }

    /// Brings the summaries up to date with the ledger's changes since the last call.
    pub(crate) fn refresh(&mut self, topology: &Topology, ledger: &mut Ledger) {
        let changed = ledger.take_changed();
        match (changed, self.built) {
            (Some(nodes), true) => self.reread(topology, ledger, &nodes),
            _ => *self = Self::built(topology, ledger),
        }
        #[cfg(feature = "testing")]
        {
            let whole = Self::built(topology, ledger);
            let live = |index: &Self| {
                let nodes = (topology.nodes())
                    .map(|(id, _)| (index.node(id), index.node_inside[id as usize].clone()));
                let mut domains = Vec::new();
                topology.walk(|walked| {
                    if let Walked::Domain(_, id) = walked {
                        domains.push(index.domain(id));
                    }
                });
                (nodes.collect::<Vec<_>>(), domains)
            };
            assert_eq!(
                live(self),
                live(&whole),
                "the kept preemption index is stale"
            );
            for (domain, kept) in (0..).zip(self.inside.borrow().iter()) {
                let fresh = || inside(ledger, &topology.nodes_under(domain));
                assert!(
                    kept.as_ref().is_none_or(|kept| *kept == fresh()),
                    "stale GPUs inside"
                );
            }
        }
    }

    /// The summaries of every node and domain, from scratch.
    fn built(topology: &Topology, ledger: &Ledger) -> Self {
        let mut index = Self {
            nodes: vec![Summary::default(); topology.node_slots()],
            node_inside: vec![NodeInside::new(); topology.node_slots()],
            domains: vec![Summary::default(); topology.domain_slots()],
            inside: RefCell::new(Vec::new()),
            built: true,
        };
        let mut preorder = Vec::new();
        topology.walk(|walked| match walked {
            Walked::Node(_, node) => {
                let slot = node as usize;
                (index.nodes[slot], index.node_inside[slot]) = node_summary(ledger, node);
            }
            Walked::Domain(_, id) => preorder.push(id),
        });
        // Children come after their parent in preorder: backwards, every child is done first.
        for &id in preorder.iter().rev() {
            index.domains[id as usize] = index.of_children(topology, id);
        }
        index
    }

    /// Re-reads `nodes` and the domains above them, deepest first.
    fn reread(&mut self, topology: &Topology, ledger: &Ledger, nodes: &[NodeId]) {
        let mut domains: BTreeSet<(Reverse<usize>, DomainId)> = BTreeSet::new();
        for &node in nodes {
            if (node as usize) >= self.nodes.len() || topology.node(node).is_vacant() {
                continue;
            }
            let slot = node as usize;
            (self.nodes[slot], self.node_inside[slot]) = node_summary(ledger, node);
            for id in topology.ancestors(topology.node(node).domain) {
                domains.insert((Reverse(topology.domain(id).depth), id));
            }
        }
        let inside = self.inside.get_mut();
        for &(_, id) in &domains {
            if let Some(kept) = inside.get_mut(id as usize) {
                *kept = None;
            }
        }
        for (_, id) in domains {
            self.domains[id as usize] = self.of_children(topology, id);
        }
    }

    /// A domain's summary from its children's.
    fn of_children(&self, topology: &Topology, id: DomainId) -> Summary {
        let domain = topology.domain(id);
        let domains = domain.child_domains.iter().map(|&child| self.domain(child));
        let nodes = domain.child_nodes.iter().map(|&node| self.node(node));
        domains.chain(nodes).fold(Summary::default(), Summary::with)
    }
}
