//! The bridge from the engine's operations to a search over the right view: `search_over`
//! picks the cluster's view or a selector's pool for a request, and `SearchOps` is what the
//! operations call on it, whatever the view (placement rules, and preemption's removal sets).

use crate::capacity::ResourceFit;
use crate::capacity::ShareFit;
use crate::capacity::{Capacity, CapacityView, ShapeKey};
use crate::config::Policy;
use crate::error::{CoreResult, internal};
use crate::limits::MAX_GPUS_PER_NODE;
use crate::model::GangRequest;
use crate::resources::Amounts;
use crate::search::removal::{Candidates, Choice, Descent, Found, Summaries, World, WorldShares};
use crate::search::{Demand, Item, LevelBest, Plan, Search};
use crate::shapes::Layers;
use crate::state::NodeStates;
use crate::topology::Topology;

/// Runs `search` over the view `request` calls for on this state. With `removal` (a removal
/// set is searched), a request asking resources always counts them: freeing GPUs may make
/// them bind where they bind nowhere now.
pub(super) fn search_over<R>(
    (topology, states, capacity): (&Topology, &NodeStates, &Capacity),
    request: &GangRequest,
    removal: bool,
    search: impl FnOnce(&dyn SearchOps) -> R,
) -> CoreResult<R> {
    let size = request.whole_gpus(); // 0 for fractions: their shares count them
    // The names were checked by `Engine::demand`, which every search of a request follows.
    let layers = Layers::resolve(topology, &request.slices, 0)?;
    let need = topology.resources().names().resolve(&request.resources)?;
    let binds = match removal {
        false => resources_bind((topology, states, capacity), request, &need),
        true => resources_bind_after_removal((topology, states, capacity), request, &need),
    };
    let fit = binds.then(|| {
        ResourceFit::new(
            &need,
            topology.resources().capacities(),
            states.resource_use(),
        )
    });
    let share = ShareFit::of(request.gpu_milli, states);
    if request.filter.is_plain() {
        let view = capacity.cluster_view(states);
        // The kept counts hold for the cluster's own view, nothing taken or freed.
        let counts = match (&fit, &share, removal) {
            (Some(_), None, false) => capacity.shape(&shape_key(request, need.clone())),
            _ => None,
        };
        return Ok(search(
            &Search::new(topology, &view, size)
                .with_shape(layers, request.spread)
                .with_numa(request.numa)
                .with_resources(fit)
                .with_shares(share)
                .with_counts(counts),
        ));
    }
    let view = capacity
        .selector_view(states, &request.filter)
        .ok_or_else(|| internal("a selector lost its pool"))?;
    Ok(search(
        &Search::new(topology, &view, size)
            .with_shape(layers, request.spread)
            .with_numa(request.numa)
            .with_resources(fit)
            .with_shares(share),
    ))
}

/// Whether `request`'s resources besides GPUs (`need`) may bound its pod counts on this
/// state. They do not when none is asked, or when even the least free node holds as many
/// pods as the most free GPUs of any usable node do: then counting GPUs alone gives the
/// same answers. Pods without GPUs are counted by their resources alone.
pub(super) fn resources_bind(
    (topology, states, capacity): (&Topology, &NodeStates, &Capacity),
    request: &GangRequest,
    need: &Amounts,
) -> bool {
    // A request that tolerates taints may use tainted nodes, which the cluster's own view
    // leaves out: its most free node is not known there, so the bound is the largest node.
    let view = capacity.cluster_view(states);
    let index = view
        .index()
        .filter(|_| request.filter.tolerations.is_empty());
    let most_free = index.map_or(u64::from(MAX_GPUS_PER_NODE), |index| {
        index.level(topology.node_depth()).most_free()
    });
    binds_up_to(states, request, need, most_free)
}

impl super::Engine {
    /// Whether a removal set for `request` counts its resources besides GPUs: they may bind
    /// once allocations are removed (docs/preemption.md "Resources").
    pub(crate) fn removal_counts_resources(&self, request: &GangRequest) -> CoreResult<bool> {
        let need = self.asked(request)?;
        let state = (&self.topology, &self.states, &self.capacity);
        Ok(resources_bind_after_removal(state, request, &need))
    }

    /// The resources besides GPUs each pod of `request` asks, by index.
    pub(crate) fn asked(&self, request: &GangRequest) -> CoreResult<Amounts> {
        let names = self.topology.resources().names();
        names.resolve(&request.resources)
    }
}

/// Whether `request`'s resources may bind once allocations are removed: the removals give
/// back resources and GPUs, so a node may then hold as many pods as its GPUs allow, and
/// none has more GPUs than the largest node (docs/resources.md "Node resources").
fn resources_bind_after_removal(
    (topology, states, capacity): (&Topology, &NodeStates, &Capacity),
    request: &GangRequest,
    need: &Amounts,
) -> bool {
    let largest = capacity.largest_domain(topology.node_depth());
    let largest = largest.unwrap_or(u64::from(MAX_GPUS_PER_NODE));
    binds_up_to(states, request, need, largest)
}

/// Whether some live node's free resources hold fewer pods of `request` asking `need` than
/// `gpus` GPUs would.
fn binds_up_to(states: &NodeStates, request: &GangRequest, need: &Amounts, gpus: u64) -> bool {
    if need.is_empty() {
        return false;
    }
    let size = request.whole_gpus();
    size == 0
        || !states
            .resource_use()
            .never_binds(need, gpus / u64::from(size))
}

/// The kept-counts key of `request`'s shape asking `need`.
pub(super) fn shape_key(request: &GangRequest, need: Amounts) -> ShapeKey {
    ShapeKey {
        gpus_per_pod: request.whole_gpus(),
        numa: request.numa,
        need,
    }
}

/// The operations the engine needs of a search, whatever its view.
pub(crate) trait SearchOps {
    fn plan(&self, demand: &Demand, policy: Policy) -> CoreResult<Option<Plan>>;
    fn largest_capacity(&self, depth: usize) -> LevelBest;
    fn removal(
        &self,
        demand: &Demand,
        candidates: &Candidates,
        max_members: Option<usize>,
    ) -> CoreResult<Option<Found>>;
    fn removal_by_descent(
        &self,
        demand: &Demand,
        bounds: (&dyn Summaries, i32, usize),
        gather: &mut dyn FnMut(Item) -> Candidates,
        max_members: Option<usize>,
    ) -> CoreResult<Descent>;
    fn removal_at(&self, depth: usize, pods: u64, candidates: &Candidates) -> Option<(u64, i32)>;
    fn removal_choices(&self, candidates: &Candidates, depth: usize, pods: u64) -> Vec<Choice>;
    fn place_after_removal(
        &self,
        candidates: &Candidates,
        members: &[usize],
        depth: usize,
        item: Item,
        pods: u64,
    ) -> CoreResult<Plan>;
    fn plan_in_world(
        &self,
        world: (&World, Option<&WorldShares>),
        demand: &Demand,
        policy: Policy,
    ) -> CoreResult<Option<Plan>>;
}

impl<V: CapacityView> SearchOps for Search<'_, V> {
    fn plan(&self, demand: &Demand, policy: Policy) -> CoreResult<Option<Plan>> {
        Search::plan(self, demand, policy)
    }

    fn largest_capacity(&self, depth: usize) -> LevelBest {
        Search::largest_capacity(self, depth)
    }

    fn removal(
        &self,
        demand: &Demand,
        candidates: &Candidates,
        max_members: Option<usize>,
    ) -> CoreResult<Option<Found>> {
        crate::search::removal::find(self, demand, candidates, max_members)
    }

    fn removal_by_descent(
        &self,
        demand: &Demand,
        bounds: (&dyn Summaries, i32, usize),
        gather: &mut dyn FnMut(Item) -> Candidates,
        max_members: Option<usize>,
    ) -> CoreResult<Descent> {
        crate::search::removal::find_by_descent(self, demand, bounds, gather, max_members)
    }

    fn removal_at(&self, depth: usize, pods: u64, candidates: &Candidates) -> Option<(u64, i32)> {
        crate::search::removal::best_at(self, candidates, depth, pods)
    }

    fn removal_choices(&self, candidates: &Candidates, depth: usize, pods: u64) -> Vec<Choice> {
        crate::search::removal::all_at(self, candidates, depth, pods)
    }

    fn place_after_removal(
        &self,
        candidates: &Candidates,
        members: &[usize],
        depth: usize,
        item: Item,
        pods: u64,
    ) -> CoreResult<Plan> {
        crate::search::removal::place_after_removal(self, candidates, members, depth, item, pods)
    }

    fn plan_in_world(
        &self,
        world: (&World, Option<&WorldShares>),
        demand: &Demand,
        policy: Policy,
    ) -> CoreResult<Option<Plan>> {
        crate::search::removal::plan_in_world(self, world, demand, policy)
    }
}
