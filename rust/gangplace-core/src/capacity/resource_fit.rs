//! How many pods asking resources besides GPUs a node holds (README "Node resources"): a
//! count over the nodes' capacities and what the holds use, plus what a search has taken
//! on top of them (the earlier groups of a multi-role gang).

use crate::ids::NodeId;
use crate::resources::{Amounts, ResourceId, ResourceUse};

/// How many pods asking `need` fit node by node: `min over r of floor(free r / need r)`,
/// `free` being the capacity less what the holds use and what `taken` adds.
#[derive(Debug, Clone, Copy)]
pub struct ResourceFit<'a> {
    /// The request's per-pod amounts (not empty).
    pub need: &'a Amounts,
    /// Each node's capacity, by node slot.
    pub capacity: &'a [Amounts],
    /// What the holds use.
    pub used: &'a ResourceUse,
    /// What is taken besides, by node, sorted by node (empty: nothing).
    pub taken: &'a [(NodeId, Amounts)],
}

impl<'a> ResourceFit<'a> {
    /// The fit of `need` on these capacities and this use, nothing taken besides.
    pub fn new(need: &'a Amounts, capacity: &'a [Amounts], used: &'a ResourceUse) -> Self {
        Self {
            need,
            capacity,
            used,
            taken: &[],
        }
    }

    /// The same fit with `taken` (sorted by node) in use besides the holds' use.
    pub fn with_taken(self, taken: &'a [(NodeId, Amounts)]) -> Self {
        Self { taken, ..self }
    }

    /// Node `id`'s free `resource`: its capacity less the holds' use and what is taken.
    #[inline]
    fn free(&self, id: NodeId, resource: ResourceId) -> u64 {
        static NONE: Amounts = Amounts::none();
        let capacity = self.capacity.get(id as usize).unwrap_or(&NONE);
        let mut used = self.used.used(id).get(resource);
        if !self.taken.is_empty()
            && let Ok(at) = self.taken.binary_search_by_key(&id, |&(node, _)| node)
        {
            used = used.saturating_add(self.taken[at].1.get(resource));
        }
        capacity.get(resource).saturating_sub(used)
    }

    /// Pods of this need that node `id`'s free resources hold, and the first resource (by
    /// id) that bounds them to that number.
    pub fn pods_with_bound(&self, id: NodeId) -> (u64, ResourceId) {
        let mut best = (u64::MAX, 0);
        for &(resource, per_pod) in self.need.pairs() {
            let pods = self.free(id, resource) / per_pod;
            if pods < best.0 {
                best = (pods, resource);
            }
        }
        best
    }

    /// Pods of this need that node `id`'s free `resource` alone holds.
    pub fn pods_of(&self, id: NodeId, resource: ResourceId) -> u64 {
        self.free(id, resource) / self.need.get(resource).max(1)
    }

    /// Pods of this need that node `id`'s free resources hold.
    pub fn pods(&self, id: NodeId) -> u64 {
        self.pods_with_bound(id).0
    }
}
