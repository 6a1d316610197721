//! The kept index of preemption (the ledger's, read by [`crate::preemption`]) (docs/preemption.md "How a plan finds its set"): per node and
//! per domain, a [`Summary`] of the allocations there that could ever be candidates, kept
//! from the ledger's list of changed nodes, so that a plan reads bounds per domain and visits
//! only the allocations of the domains it considers ([`crate::search::removal`]'s descent).

use std::cmp::Reverse;
use std::collections::BTreeSet;

use super::{Hold, HoldState, Ledger};
use crate::ids::{DomainId, NodeId};
use crate::search::removal::{Summaries, Summary};
use crate::topology::{Topology, Walked};

/// Whether `hold` could be a victim of some preemption (P1, whatever the request): a
/// committed, preemptible allocation of whole GPUs.
pub(crate) fn could_be_victim(hold: &Hold) -> bool {
    hold.state == HoldState::Committed
        && hold.terms.preemptible
        && hold.placement.gpu_milli.is_none()
}

/// Summaries per node slot and per domain slot; rebuilt whole after the topology changes,
/// re-read node by node (and up their domains) after holds change.
#[derive(Debug, Default, Clone)]
pub(crate) struct VictimIndex {
    nodes: Vec<Summary>,
    domains: Vec<Summary>,
    /// Whether the summaries match the topology (false after a node is added or removed).
    built: bool,
}

impl Summaries for VictimIndex {
    fn node(&self, node: NodeId) -> Summary {
        self.nodes.get(node as usize).copied().unwrap_or_default()
    }

    fn domain(&self, domain: DomainId) -> Summary {
        self.domains
            .get(domain as usize)
            .copied()
            .unwrap_or_default()
    }
}

/// The summary of the holds on `node`.
fn node_summary(ledger: &Ledger, node: NodeId) -> Summary {
    let mut summary = Summary::default();
    for &(id, _) in ledger.holders_of(node) {
        if let Some(hold) = ledger.live(id).filter(|hold| could_be_victim(hold)) {
            summary.add(hold.terms.priority, hold.gpu_count());
        }
    }
    summary
}

impl VictimIndex {
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
                let nodes = topology.nodes().map(|(id, _)| index.node(id));
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
        }
    }

    /// The summaries of every node and domain, from scratch.
    fn built(topology: &Topology, ledger: &Ledger) -> Self {
        let mut index = Self {
            nodes: vec![Summary::default(); topology.node_slots()],
            domains: vec![Summary::default(); topology.domain_slots()],
            built: true,
        };
        let mut preorder = Vec::new();
        topology.walk(|walked| match walked {
            Walked::Node(_, node) => index.nodes[node as usize] = node_summary(ledger, node),
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
            self.nodes[node as usize] = node_summary(ledger, node);
            for id in topology.ancestors(topology.node(node).domain) {
                domains.insert((Reverse(topology.domain(id).depth), id));
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
