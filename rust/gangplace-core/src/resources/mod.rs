//! Node resources beside GPUs (docs/resources.md "Node resources"): CPU in millicores, memory in bytes
//! and any other named quantity a node offers and a pod asks (`rdma/ib`, hugepages, ...).
//!
//! Names are interned once, in the order nodes first declare them ([`ResourceNames`], part of
//! the static topology); amounts are sorted `(id, quantity)` lists ([`Amounts`]). A node holds
//! `min(floor(free GPUs / g), floor(free r / r per pod) for every requested r)` pods: the GPU
//! count comes from the capacity views, the resource count from [`ResourceUse`] (the mutable
//! half: what the live holds use on each node), node by node ([`crate::capacity::ResourceFit`]).

use std::collections::BTreeMap;

use crate::error::{CoreResult, invalid};
use crate::ids::NodeId;
use crate::limits::{MAX_NAME_BYTES, MAX_RESOURCE_AMOUNT, MAX_RESOURCES_PER_NODE};

/// A resource name's id: its position in the order nodes first declared the names.
pub type ResourceId = u16;

/// The first id above every name's: ids from here up hold shares of GPUs, GPU `i`'s being
/// this plus `i` (module `shares`, docs/resources.md "Fractions of a GPU").
pub const FIRST_SHARE_ID: ResourceId = 0xFF00;

/// Quantities by resource id: sorted by id, ids unique, no zero quantity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Amounts(Vec<(ResourceId, u64)>);

impl Amounts {
    /// No resources.
    pub const fn none() -> Self {
        Self(Vec::new())
    }

    /// From pairs with unique ids (zeros dropped, sorted here).
    pub(crate) fn from_pairs(mut pairs: Vec<(ResourceId, u64)>) -> Self {
        pairs.retain(|&(_, quantity)| quantity > 0);
        pairs.sort_unstable();
        Self(pairs)
    }

    /// Whether no resource is named.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `(id, quantity)` pairs, by id.
    pub fn pairs(&self) -> &[(ResourceId, u64)] {
        &self.0
    }

    /// The quantity of `id` (0 when not named).
    pub fn get(&self, id: ResourceId) -> u64 {
        self.0
            .iter()
            .find(|&&(named, _)| named == id)
            .map_or(0, |&(_, quantity)| quantity)
    }

    /// Every quantity times `times` (saturating: quantities are at most 2^50 and pods at
    /// most 2^28, so a real product never saturates).
    pub fn times(&self, times: u64) -> Self {
        let pairs = self.0.iter();
        Self::from_pairs(
            pairs
                .map(|&(id, q)| (id, q.saturating_mul(times)))
                .collect(),
        )
    }

    /// The sum of two amounts.
    pub fn plus(&self, other: &Self) -> Self {
        let mut sum: BTreeMap<ResourceId, u64> = self.0.iter().copied().collect();
        for &(id, quantity) in other.0.iter() {
            let entry = sum.entry(id).or_default();
            *entry = entry.saturating_add(quantity);
        }
        Self::from_pairs(sum.into_iter().collect())
    }

    /// `self - other` per resource, floored at zero.
    pub fn minus(&self, other: &Self) -> Self {
        let pairs = self.0.iter();
        Self::from_pairs(
            pairs
                .map(|&(id, q)| (id, q.saturating_sub(other.get(id))))
                .collect(),
        )
    }

    /// Whether every quantity of `self` is at most that of `other`.
    pub fn within(&self, other: &Self) -> bool {
        self.0
            .iter()
            .all(|&(id, quantity)| quantity <= other.get(id))
    }
}

/// Resource names and their ids, in the order nodes first declared them. Names stay known
/// once declared (a node removed keeps them), so a request's names mean the same thing for
/// the cluster's whole life.
#[derive(Debug, Clone, Default)]
pub struct ResourceNames {
    names: Vec<Box<str>>,
    ids: BTreeMap<Box<str>, ResourceId>,
}

/// Checks one resource name (non-empty, at most [`MAX_NAME_BYTES`], not a GPU name).
fn check_resource_name(name: &str) -> CoreResult<()> {
    if name.is_empty() {
        return Err(invalid("a resource name must not be empty"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "resource name {:?}... is {} bytes long; the limit is {MAX_NAME_BYTES}",
            name.chars().take(16).collect::<String>(),
            name.len()
        )));
    }
    if name == "nvidia.com/gpu" || name == "gpu" {
        return Err(invalid(format!(
            "resource {name:?}: whole GPUs are counted by gpus= and gpus_per_pod=, not as a \
             resource"
        )));
    }
    Ok(())
}

/// Checks one quantity (`0..=MAX_RESOURCE_AMOUNT`), naming the resource and `what` has it.
fn check_amount(what: &str, name: &str, quantity: i64) -> CoreResult<u64> {
    u64::try_from(quantity)
        .ok()
        .filter(|&quantity| quantity <= MAX_RESOURCE_AMOUNT)
        .ok_or_else(|| {
            invalid(format!(
                "{what}: resource {name:?} must be between 0 and {MAX_RESOURCE_AMOUNT} (base \
                 units: millicores, bytes, units), got {quantity}"
            ))
        })
}

/// Validates named quantities (names unique and valid, quantities in range, at most
/// [`MAX_RESOURCES_PER_NODE`]); returns them sorted by name, zeros kept (a node declaring a
/// resource at 0 makes its name known; requests drop them).
pub fn checked_named(what: &str, named: Vec<(String, i64)>) -> CoreResult<Vec<(String, u64)>> {
    if named.len() > MAX_RESOURCES_PER_NODE {
        return Err(invalid(format!(
            "{what}: {} resources named; the limit is {MAX_RESOURCES_PER_NODE}",
            named.len()
        )));
    }
    let mut checked = Vec::with_capacity(named.len());
    for (name, quantity) in named {
        check_resource_name(&name)?;
        let quantity = check_amount(what, &name, quantity)?;
        checked.push((name, quantity));
    }
    checked.sort();
    if let Some(pair) = checked.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        return Err(invalid(format!(
            "{what}: resource {:?} is named twice",
            pair[0].0
        )));
    }
    Ok(checked)
}

impl ResourceNames {
    /// The id of every name, declaring the new ones (names already checked).
    pub fn declare(&mut self, named: &[(String, u64)]) -> Amounts {
        let pairs = named.iter().map(|(name, quantity)| {
            let id = match self.ids.get(name.as_str()) {
                Some(&id) => id,
                None => {
                    // At most MAX_RESOURCES_PER_NODE per node; the id space is checked by
                    // `can_declare` before any node is added.
                    let id = ResourceId::try_from(self.names.len()).unwrap_or(ResourceId::MAX);
                    self.names.push(name.as_str().into());
                    self.ids.insert(name.as_str().into(), id);
                    id
                }
            };
            (id, *quantity)
        });
        Amounts::from_pairs(pairs.collect())
    }

    /// Whether declaring `named` keeps the ids below the GPU shares' (at most 65,279 names).
    pub fn can_declare(&self, named: &[(String, u64)]) -> CoreResult<()> {
        let new = named
            .iter()
            .filter(|(name, _)| !self.ids.contains_key(name.as_str()))
            .count();
        // Ids from `FIRST_SHARE_ID` up are GPU shares (docs/resources.md "Fractions of a GPU").
        if self.names.len() + new >= usize::from(FIRST_SHARE_ID) {
            return Err(invalid("a cluster knows at most 65,279 resource names"));
        }
        Ok(())
    }

    /// The amounts a request names, every name known (`InvalidRequest` naming the unknown
    /// one and the known ones otherwise: a name no node ever declared is a typo).
    pub fn resolve(&self, named: &[(String, u64)]) -> CoreResult<Amounts> {
        let mut pairs = Vec::with_capacity(named.len());
        for (name, quantity) in named {
            let Some(&id) = self.ids.get(name.as_str()) else {
                let known: Vec<&str> = self.ids.keys().map(|name| &**name).collect();
                return Err(invalid(format!(
                    "resources_per_pod names {name:?}, which no node of the cluster offers \
                     (known: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )));
            };
            pairs.push((id, *quantity));
        }
        Ok(Amounts::from_pairs(pairs))
    }

    /// How many names are known (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name is known.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Every known name, sorted.
    pub fn all(&self) -> impl Iterator<Item = &str> {
        self.ids.keys().map(|name| &**name)
    }

    /// The name of `id`.
    pub fn name(&self, id: ResourceId) -> &str {
        self.names.get(usize::from(id)).map_or("?", |name| name)
    }

    /// `amounts` by name, sorted by name.
    pub fn named(&self, amounts: &Amounts) -> Vec<(String, u64)> {
        let mut named: Vec<(String, u64)> = (amounts.pairs().iter())
            .map(|&(id, quantity)| (self.name(id).to_owned(), quantity))
            .collect();
        named.sort();
        named
    }
}

/// What the live holds use on each node slot (the mutable half; capacities are the
/// topology's, mirrored here), and per resource the multiset of the live nodes' free
/// amounts (a node lacking the resource counts as 0 free), so that the smallest free amount
/// of any node is one read: when even it holds as many pods as the most free GPUs of any
/// node do, no node's resources bind and a search counts GPUs only.
#[derive(Debug, Clone, Default)]
pub struct ResourceUse {
    used: Vec<Amounts>,
    capacity: Vec<Amounts>,
    live: Vec<bool>,
    /// By resource id: free amount -> live nodes with it.
    free: Vec<BTreeMap<u64, u32>>,
    live_count: u32,
    /// By resource id: the live nodes' capacities and free amounts summed (`stats`).
    totals: Vec<(u64, u64)>,
}

impl ResourceUse {
    /// What node `id` has in use.
    pub fn used(&self, id: NodeId) -> &Amounts {
        static NONE: Amounts = Amounts::none();
        self.used.get(id as usize).unwrap_or(&NONE)
    }

    fn capacity_of(&self, id: NodeId) -> &Amounts {
        static NONE: Amounts = Amounts::none();
        self.capacity.get(id as usize).unwrap_or(&NONE)
    }

    fn free_of(&self, id: NodeId, resource: ResourceId) -> u64 {
        (self.capacity_of(id).get(resource)).saturating_sub(self.used(id).get(resource))
    }

    fn grow(&mut self, id: NodeId) {
        let slot = id as usize;
        if slot >= self.used.len() {
            self.used.resize(slot + 1, Amounts::none());
            self.capacity.resize(slot + 1, Amounts::none());
            self.live.resize(slot + 1, false);
        }
    }

    /// Counts (`add`) or forgets node `id`'s free amount of every known resource.
    fn index_node(&mut self, id: NodeId, add: bool) {
        if !self.live.get(id as usize).copied().unwrap_or(false) {
            return;
        }
        for resource in 0..self.free.len() {
            let resource = ResourceId::try_from(resource).unwrap_or(ResourceId::MAX);
            let free = self.free_of(id, resource);
            index_change(&mut self.free[usize::from(resource)], free, add);
            let capacity = self.capacity_of(id).get(resource);
            let total = &mut self.totals[usize::from(resource)];
            match add {
                true => *total = (total.0 + capacity, total.1 + free),
                false => *total = (total.0 - capacity, total.1 - free),
            }
        }
    }

    /// `names` resource names are known now: new ones start with every live node at 0 free.
    pub fn sync_names(&mut self, names: usize) {
        while self.free.len() < names {
            let mut zeros = BTreeMap::new();
            if self.live_count > 0 {
                zeros.insert(0, self.live_count);
            }
            self.free.push(zeros);
            self.totals.push((0, 0));
        }
    }

    /// By resource id: the live nodes' capacities and free amounts, summed.
    pub fn totals(&self) -> &[(u64, u64)] {
        &self.totals
    }

    /// A node was added in slot `id` with `capacity`, nothing used.
    pub fn node_added(&mut self, id: NodeId, capacity: &Amounts) {
        self.grow(id);
        let slot = id as usize;
        self.capacity[slot] = capacity.clone();
        self.used[slot] = Amounts::none();
        self.live[slot] = true;
        self.live_count += 1;
        self.index_node(id, true);
    }

    /// Node `id`'s capacity changed (`update_node`).
    pub fn capacity_changed(&mut self, id: NodeId, capacity: &Amounts) {
        self.grow(id);
        self.index_node(id, false);
        self.capacity[id as usize] = capacity.clone();
        self.index_node(id, true);
    }

    /// Adds `amounts` to node `id`'s use.
    pub fn take(&mut self, id: NodeId, amounts: &Amounts) {
        if amounts.is_empty() {
            return;
        }
        self.grow(id);
        self.index_node(id, false);
        let slot = id as usize;
        self.used[slot] = self.used[slot].plus(amounts);
        self.index_node(id, true);
    }

    /// Takes `amounts` back from node `id`'s use.
    pub fn give(&mut self, id: NodeId, amounts: &Amounts) {
        if amounts.is_empty() || id as usize >= self.used.len() {
            return;
        }
        self.index_node(id, false);
        let slot = id as usize;
        self.used[slot] = self.used[slot].minus(amounts);
        self.index_node(id, true);
    }

    /// Forgets node `id` (its node was removed).
    pub fn clear(&mut self, id: NodeId) {
        if id as usize >= self.used.len() {
            return;
        }
        self.index_node(id, false);
        let slot = id as usize;
        if self.live[slot] {
            self.live_count -= 1;
        }
        self.live[slot] = false;
        self.used[slot] = Amounts::none();
        self.capacity[slot] = Amounts::none();
    }

    /// Every node slot's use, by slot (for the invariant check).
    pub fn all(&self) -> impl Iterator<Item = (NodeId, &Amounts)> {
        (0..).zip(self.used.iter())
    }

    /// Whether no live node's free resources hold fewer than `pods` pods asking `need` (so
    /// a node holding at most `pods` pods by its GPUs is never bound by its resources).
    pub fn never_binds(&self, need: &Amounts, pods: u64) -> bool {
        need.pairs().iter().all(|&(resource, per_pod)| {
            let least = (self.free.get(usize::from(resource)))
                .and_then(|free| free.keys().next().copied())
                .unwrap_or(0);
            self.live_count == 0 || least / per_pod >= pods
        })
    }

    /// Whether the free-amount multisets match the nodes (for the invariant check).
    pub fn check_index(&self, capacities: &[Amounts]) -> Result<(), String> {
        let mut fresh = self.clone();
        fresh.free.iter_mut().for_each(BTreeMap::clear);
        fresh.totals.iter_mut().for_each(|total| *total = (0, 0));
        for id in 0..self.used.len() {
            let id = NodeId::try_from(id).unwrap_or(NodeId::MAX);
            fresh.index_node(id, true);
        }
        if fresh.free != self.free || fresh.totals != self.totals {
            return Err("the free resource amounts index or totals are stale".into());
        }
        let live = (self.live.iter().zip(&self.capacity)).enumerate();
        for (slot, (&live, capacity)) in live {
            let topology = capacities.get(slot).cloned().unwrap_or_default();
            if live && *capacity != topology {
                return Err(format!(
                    "node slot {slot}'s resources drifted from the topology"
                ));
            }
        }
        Ok(())
    }
}

/// One node's free amount added to or removed from a multiset.
fn index_change(index: &mut BTreeMap<u64, u32>, free: u64, add: bool) {
    if add {
        *index.entry(free).or_default() += 1;
    } else if let Some(count) = index.get_mut(&free) {
        *count -= 1;
        if *count == 0 {
            index.remove(&free);
        }
    }
}

/// The resources every node offers: the names, and each node slot's capacity (static, like
/// its GPU count; part of the topology).
#[derive(Debug, Clone, Default)]
pub struct NodeResources {
    names: ResourceNames,
    capacity: Vec<Amounts>,
}

impl NodeResources {
    /// The known names.
    pub fn names(&self) -> &ResourceNames {
        &self.names
    }

    /// Checks node `node`'s resources before anything changes (sorted by name, zeros
    /// dropped).
    pub fn check(&self, node: &str, named: Vec<(String, i64)>) -> CoreResult<Vec<(String, u64)>> {
        let checked = checked_named(&format!("node {node:?}"), named)?;
        self.names.can_declare(&checked)?;
        Ok(checked)
    }

    /// Sets node slot `id`'s capacity to checked `named` amounts (declaring new names).
    pub fn set(&mut self, id: NodeId, named: &[(String, u64)]) {
        let amounts = self.names.declare(named);
        let slot = id as usize;
        if slot >= self.capacity.len() {
            self.capacity.resize(slot + 1, Amounts::none());
        }
        self.capacity[slot] = amounts;
    }

    /// Declares names (a restored snapshot's) without giving any node them.
    pub fn declare_names(&mut self, names: &[String]) -> CoreResult<()> {
        let named: Vec<(String, u64)> = names.iter().map(|name| (name.clone(), 0)).collect();
        for (name, _) in &named {
            check_resource_name(name)?;
        }
        self.names.can_declare(&named)?;
        self.names.declare(&named);
        Ok(())
    }

    /// Node slot `id`'s capacity.
    pub fn capacity(&self, id: NodeId) -> &Amounts {
        static NONE: Amounts = Amounts::none();
        self.capacity.get(id as usize).unwrap_or(&NONE)
    }

    /// Every slot's capacity, by slot.
    pub fn capacities(&self) -> &[Amounts] {
        &self.capacity
    }

    /// Whether any node ever declared a resource (a cluster without any counts GPUs only).
    pub fn any(&self) -> bool {
        !self.names.names.is_empty()
    }
}

/// Checked quantities back as the signed ones requests and nodes are given.
pub(crate) fn as_signed(named: &[(String, u64)]) -> Vec<(String, i64)> {
    (named.iter())
        .map(|(name, quantity)| (name.clone(), i64::try_from(*quantity).unwrap_or(-1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::ResourceFit;

    #[test]
    fn fit_is_the_tightest_resource() {
        let mut nodes = NodeResources::default();
        let named = nodes.check("n", vec![("cpu".into(), 10), ("memory".into(), 64)]);
        nodes.set(0, &named.unwrap());
        let names = nodes.names();
        let capacity = nodes.capacities();
        let need = names
            .resolve(&[("cpu".into(), 4), ("memory".into(), 16)])
            .unwrap();
        let mut used = ResourceUse::default();
        let fit = ResourceFit::new(&need, capacity, &used);
        assert_eq!(fit.pods_with_bound(0), (2, 0));
        used.sync_names(names.len());
        used.node_added(0, &capacity[0]);
        assert!(!used.never_binds(&need, 3) && used.never_binds(&need, 2));
        used.take(0, &need);
        assert!(used.never_binds(&need, 1) && !used.never_binds(&need, 2));
        let fit = ResourceFit::new(&need, capacity, &used);
        assert_eq!(fit.pods(0), 1);
        assert!(names.resolve(&[("cpus".into(), 1)]).is_err());
    }

    #[test]
    fn bad_names_and_amounts_are_refused() {
        assert!(checked_named("x", vec![("cpu".into(), -1)]).is_err());
        assert!(checked_named("x", vec![("".into(), 1)]).is_err());
        assert!(checked_named("x", vec![("nvidia.com/gpu".into(), 1)]).is_err());
        assert!(checked_named("x", vec![("a".into(), 1), ("a".into(), 2)]).is_err());
        let huge = i64::try_from(MAX_RESOURCE_AMOUNT).unwrap() + 1;
        assert!(checked_named("x", vec![("a".into(), huge)]).is_err());
        assert_eq!(
            checked_named("x", vec![("b".into(), 0), ("a".into(), 2)]).unwrap(),
            vec![("a".to_owned(), 2), ("b".to_owned(), 0)]
        );
    }
}
