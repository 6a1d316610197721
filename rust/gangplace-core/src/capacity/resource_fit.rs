//! How many pods asking resources besides GPUs a node holds (docs/resources.md "Node resources"): a
//! count over the nodes' capacities and what the holds use, plus what a search has taken
//! on top of them (the earlier groups of a multi-role gang) or would free (the members of
//! a removal set).

use crate::ids::NodeId;
use crate::resources::{Amounts, ResourceId, ResourceUse};

/// How many pods asking `need` fit node by node: `min over r of floor(free r / need r)`,
/// `free` being the capacity less what the holds use and what `taken` adds, plus what
/// `freed` gives back.
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
    /// What is given back, by node, sorted by node (empty: nothing).
    pub freed: &'a [(NodeId, Amounts)],
}

impl<'a> ResourceFit<'a> {
    /// The fit of `need` on these capacities and this use, nothing taken besides.
    pub fn new(need: &'a Amounts, capacity: &'a [Amounts], used: &'a ResourceUse) -> Self {
        Self {
            need,
            capacity,
            used,
            taken: &[],
            freed: &[],
        }
    }

    /// The same fit with `taken` (sorted by node) in use besides the holds' use.
    pub fn with_taken(self, taken: &'a [(NodeId, Amounts)]) -> Self {
        Self { taken, ..self }
    }

    /// The same fit with `freed` (sorted by node) given back.
    pub fn with_freed(self, freed: &'a [(NodeId, Amounts)]) -> Self {
        Self { freed, ..self }
    }

    /// Node `id`'s free `resource`: its capacity less what the holds use and what is taken,
    /// once what is freed and `extra` more are given back (a use never below zero: a node
    /// whose capacity shrank under running pods frees nothing until they end).
    #[inline]
    fn free_with(&self, id: NodeId, resource: ResourceId, extra: u64) -> u64 {
        static NONE: Amounts = Amounts::none();
        let on = |list: &[(NodeId, Amounts)]| match list.is_empty() {
            true => 0,
            false => (list.binary_search_by_key(&id, |&(node, _)| node))
                .map_or(0, |at| list[at].1.get(resource)),
        };
        let capacity = self.capacity.get(id as usize).unwrap_or(&NONE);
        let used = self
            .used
            .used(id)
            .get(resource)
            .saturating_add(on(self.taken));
        let used = used.saturating_sub(on(self.freed).saturating_add(extra));
        capacity.get(resource).saturating_sub(used)
    }

    /// Node `id`'s free `resource` (as [`ResourceFit::free_with`], nothing extra).
    #[inline]
    fn free(&self, id: NodeId, resource: ResourceId) -> u64 {
        self.free_with(id, resource, 0)
    }

    /// Pods of this need that node `id` holds once `extra` is given back besides.
    pub fn pods_with_extra(&self, id: NodeId, extra: &Amounts) -> u64 {
        let pods = |&(resource, per_pod): &(ResourceId, u64)| {
            self.free_with(id, resource, extra.get(resource)) / per_pod
        };
        self.need.pairs().iter().map(pods).min().unwrap_or(u64::MAX)
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
