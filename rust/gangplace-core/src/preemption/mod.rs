//! Priority preemption as operations: `plan_preemption` (a pure query), `preempt` (one
//! re-validated mutation), and `capacity_for` (how many copies of a gang fit now). The sets
//! themselves are chosen by [`crate::search::removal`].

mod defrag;

use std::collections::HashMap;
use std::sync::Arc;

use crate::capacity::TakenShares;
use crate::engine::Engine;
use crate::engine::removal::Purpose;
use crate::engine::transactions::{
    NewHold, Owner, check_owner, check_ttl, gpus_by_node, held_gpus,
};
use crate::error::{CoreResult, internal, texts};
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{Ending, HoldState};
use crate::model::AnyRequest;
use crate::model::{GangRequest, Placement, PreemptionPlan, RemovalLimits, Reservation};
use crate::search::removal::{Candidates, Descent, Found, Summaries};
use crate::search::{Demand, Plan};
use crate::shares::split;
use crate::state::Changes;

/// Healthy GPUs about to be freed, per node.
pub(crate) type FreedGpus = HashMap<NodeId, GpuSet>;
/// GPUs about to be given back, per owner (`None`: holds without an owner).
pub(crate) type ReturnedGpus = HashMap<Option<Arc<str>>, u64>;

impl Engine {
    /// The plan of a gang that fits as it is: no victims.
    fn plan_without_victims(&self, request: &Arc<GangRequest>, plan: &Plan) -> PreemptionPlan {
        PreemptionPlan {
            request: AnyRequest::Gang(Arc::clone(request)),
            placement: Arc::new(request.split_spares(self.placement(plan))),
            victims: Vec::new(),
            victim_gpus: 0,
            max_victim_priority: None,
            chosen_victims: false,
        }
    }

    /// Which allocations to end, and where the gang then goes (docs/preemption.md, rules P1-P6). Changes
    /// nothing but expired reservations.
    pub fn plan_preemption(
        &mut self,
        request: &Arc<GangRequest>,
        limits: &RemovalLimits,
        now: f64,
    ) -> CoreResult<Option<PreemptionPlan>> {
        refuse_unsupported_shapes(request, "plan_preemption")?;
        let (demand, plan) = self.plan(request, now)?;
        if let Some(plan) = plan {
            return Ok(Some(self.plan_without_victims(request, &plan)));
        }
        let priority = request.terms.priority;
        // A request asking resources besides GPUs counts what the victims give back of them
        // too (docs/resources.md "Node resources"), unless they cannot bind even then.
        let resources = self.removal_counts_resources(request)?;
        // The kept index knows where holds have GPUs, not where they hold other resources:
        // named candidates (P7) and requests whose resources may bind read every candidate.
        // The descent's bounds count whole GPUs free: a fractional gang reads every candidate.
        let whole = request.gpu_milli.is_none();
        let descended = limits.only_holds.is_none() && !resources && whole;
        let found = match descended {
            true => self.found_by_descent(request, &demand, limits, now)?,
            false => None,
        };
        let (candidates, found) = match found {
            Some(found) => found,
            None => {
                let purpose = Purpose::Preemption;
                let candidates = self.counted_candidates(priority, limits, purpose, now, resources);
                let found = self.with_removal_search(request, |search| {
                    search.removal(&demand, &candidates, limits.max_members)
                })??;
                (candidates, found)
            }
        };
        let Some(found) = found else {
            return Ok(None);
        };
        let members = found.choice.members.iter().map(|&m| &candidates[m]);
        let mut victims: Vec<HoldId> = members.clone().map(|c| c.id).collect();
        victims.sort_unstable();
        Ok(Some(PreemptionPlan {
            request: AnyRequest::Gang(Arc::clone(request)),
            placement: Arc::new(request.split_spares(self.placement(&found.plan))),
            victims,
            victim_gpus: members.clone().map(|c| c.held).sum(),
            max_victim_priority: members.map(|c| c.priority).max(),
            chosen_victims: limits.only_holds.is_some(),
        }))
    }

    /// The set P3-P6 choose, found from the kept index (docs/preemption.md "How a plan finds
    /// its set"), with the candidates its members index; `None` when the descent does not
    /// apply and every candidate must be read. Test builds check the answer against that.
    fn found_by_descent(
        &mut self,
        request: &Arc<GangRequest>,
        demand: &Demand,
        limits: &RemovalLimits,
        now: f64,
    ) -> CoreResult<Option<(Candidates, Option<Found>)>> {
        self.victims.refresh(&self.topology, &mut self.ledger);
        let priority = request.terms.priority;
        let mut gather = |item| self.candidates_in(item, (priority, limits, now));
        // The descent pays per candidate it reads, and more than a plan over every one when
        // its bounds prune little: past 32 and a 64th of the live holds, it gives up.
        let budget = 32 + self.ledger.live_count() / 64;
        let descent = self.with_removal_search(request, |search| {
            let kept = self.victims.bounds(&self.topology, &self.ledger);
            let bounds = (&kept as &dyn Summaries, priority, budget);
            search.removal_by_descent(demand, bounds, &mut gather, limits.max_members)
        })??;
        let answer = match descent {
            Descent::NotApplicable => return Ok(None),
            Descent::Found(candidates, found) => (*candidates, Some(found)),
            // An elastic gang tries fewer pods over every candidate (P6).
            Descent::NoneFound if demand.min_pods < demand.pods => return Ok(None),
            Descent::NoneFound => (Candidates::default(), None),
        };
        #[cfg(feature = "testing")]
        self.check_descent(request, demand, limits, now, &answer)?;
        Ok(Some(answer))
    }

    /// Test builds: the descent's set is the one planned over every candidate.
    #[cfg(feature = "testing")]
    fn check_descent(
        &self,
        request: &Arc<GangRequest>,
        demand: &Demand,
        limits: &RemovalLimits,
        now: f64,
        (candidates, found): &(Candidates, Option<Found>),
    ) -> CoreResult<()> {
        let purpose = Purpose::Preemption;
        let priority = request.terms.priority;
        let all = self.counted_candidates(priority, limits, purpose, now, false);
        let expected = self.with_removal_search(request, |search| {
            search.removal(demand, &all, limits.max_members)
        })??;
        let ids = |found: &Found, candidates: &Candidates| {
            let mut ids: Vec<HoldId> = found
                .choice
                .members
                .iter()
                .map(|&m| candidates[m].id)
                .collect();
            ids.sort_unstable();
            (
                ids,
                found.choice.item,
                found.choice.free_after,
                found.plan.clone(),
            )
        };
        assert_eq!(
            found.as_ref().map(|found| ids(found, candidates)),
            expected.as_ref().map(|found| ids(found, &all)),
            "the descent chose another set than the planner over every candidate"
        );
        Ok(())
    }

    /// Refuses a plan whose victims are no longer live allocations ranking below
    /// `priority`; returns the healthy GPUs they hold per node and the GPUs each owner
    /// would get back.
    pub(crate) fn check_victims(
        &self,
        victims: &[HoldId],
        allowed: impl Fn(&crate::ledger::Hold) -> bool,
    ) -> CoreResult<(FreedGpus, ReturnedGpus)> {
        let mut freed: HashMap<NodeId, GpuSet> = HashMap::new();
        let mut returned: HashMap<Option<Arc<str>>, u64> = HashMap::new();
        for &id in victims {
            let hold = self
                .ledger
                .live(id)
                .filter(|hold| hold.state == HoldState::Committed && allowed(hold));
            let hold = hold.ok_or_else(|| texts::victim_changed(id))?;
            for &(node, gpus) in &hold.gpus_by_node {
                let healthy = gpus & !self.states.get(node).unhealthy;
                *freed.entry(node).or_default() |= healthy;
            }
            *returned.entry(hold.owner.clone()).or_default() += hold.gpu_count();
        }
        Ok((freed, returned))
    }

    /// The shares live `victims` hold on healthy GPUs, per `(node, GPU)`.
    pub(crate) fn shares_given_back(&self, victims: &[HoldId]) -> TakenShares {
        let mut given_back = TakenShares::new();
        let holds = victims.iter().filter_map(|&id| self.ledger.live(id));
        for hold in holds.filter(|hold| hold.placement.gpu_milli.is_some()) {
            for (node, amounts) in &hold.resources_by_node {
                let unhealthy = self.states.unhealthy(*node);
                for (gpu, milli) in split(amounts).1 {
                    if !unhealthy.contains(gpu) {
                        *given_back.entry((*node, gpu)).or_default() += milli;
                    }
                }
            }
        }
        given_back
    }

    /// `freed` with every shared GPU whose shares are all `given_back` (P8).
    pub(crate) fn freed_whole(&self, mut freed: FreedGpus, given_back: &TakenShares) -> FreedGpus {
        for (&(node, gpu), &back) in given_back {
            if back >= self.states.shares().used(node, gpu) {
                *freed.entry(node).or_default() |= GpuSet::single(gpu);
            }
        }
        freed
    }

    /// The GPUs of `placement` per node, refusing any that is not free (or, with `freed`,
    /// about to be freed) and healthy on a live, uncordoned node inside its domain.
    pub(crate) fn check_target(
        &self,
        placement: &Placement,
        freed: &HashMap<NodeId, GpuSet>,
    ) -> CoreResult<Vec<(NodeId, GpuSet)>> {
        let mut pods = Vec::with_capacity(placement.pods.len());
        for pod in &placement.pods {
            let node = self.pod_node(placement, &pod.node)?;
            let state = self.states.get(node);
            let usable = state.free() | freed.get(&node).copied().unwrap_or_default();
            if let Some(gpu) = (pod.gpus & !usable).lowest() {
                return Err(texts::plan_gpu_taken(gpu, &pod.node));
            }
            pods.push((node, pod.gpus));
        }
        gpus_by_node(pods.into_iter()).ok_or_else(|| texts::one_gpu_two_pods("the plan"))
    }

    /// Ends the plan's victims and holds its placement, atomically, after re-validating
    /// everything; on any change since the plan, [`CoreError::Conflict`] and nothing changes.
    pub fn preempt(
        &mut self,
        plan: &PreemptionPlan,
        ttl: f64,
        owner: Owner<'_>,
        now: f64,
    ) -> CoreResult<Reservation> {
        check_ttl(ttl)?;
        check_owner(owner)?;
        self.reclaim(now);
        let terms = plan.request.terms();
        let (freed, returned) = self.check_victims(&plan.victims, |hold| {
            hold.terms.preemptible && (plan.chosen_victims || hold.terms.priority < terms.priority)
        })?;
        // Shares hold no whole GPU: each pod's GPU needs room, a victim's GPUs and shares
        // counted free; a GPU all of whose shares are victims' is free (P8).
        let given_back = self.shares_given_back(&plan.victims);
        let held = match plan.placement.gpu_milli {
            Some(milli) => {
                self.check_shares_after(&plan.placement, milli, &freed, &given_back, None)?;
                Vec::new()
            }
            None => {
                let freed = self.freed_whole(freed, &given_back);
                self.check_target(&plan.placement, &freed)?
            }
        };
        self.check_target_resources(&plan.request, &plan.placement, &plan.victims)?;
        let own = returned.get(&owner.map(Arc::from)).copied().unwrap_or(0);
        self.check_cap_after(owner, held_gpus(&held), own)?;
        let (request, roles) = match &plan.request {
            AnyRequest::Gang(request) => (Some(Arc::clone(request)), None),
            AnyRequest::Roles(request) => (None, Some(Arc::clone(request))),
        };
        let new = NewHold {
            placement: Arc::clone(&plan.placement),
            expires_at: now + ttl,
            owner,
            terms,
            since: now,
            request,
            roles,
            pod_resources: None,
        };
        let id = self.ledger.new_id()?;
        let mut changes = Changes::new();
        for &victim in &plan.victims {
            let (states, ledger) = (&mut self.states, &mut self.ledger);
            ledger.end(states, &mut changes, victim, Ending::Preempted);
        }
        let reservation = self.hold_into(&mut changes, id, held, new);
        self.apply(&changes);
        Ok(reservation)
    }

    /// How many disjoint copies of `request` `reserve_many` would place now, each seeing the
    /// GPUs the previous ones took (owner caps aside). Changes nothing but expired
    /// reservations.
    pub fn capacity_for(&mut self, request: &GangRequest, now: f64) -> CoreResult<u64> {
        let request = &*request.placed();
        let demand = self.prepare(request, now)?;
        let policy = self.policy();
        let need = self
            .topology
            .resources()
            .names()
            .resolve(&request.resources)?;
        let mut what_if = self.scratch_copy();
        let mut copies = 0u64;
        loop {
            let plan = what_if.with_search(request, |search| search.plan(&demand, policy))??;
            let Some(plan) = plan else {
                return Ok(copies);
            };
            let pods: Vec<(NodeId, GpuSet)> = plan.pods.iter().map(|p| (p.node, p.gpus)).collect();
            if request.gpu_milli.is_none() {
                // Fractions hold shares of their GPUs instead (docs/resources.md "Fractions of a GPU").
                what_if.take(pods.iter().copied());
            }
            let milli = request.gpu_milli.map(u64::from);
            what_if.use_resources(&pods, &need, milli);
            copies += 1;
            if copies > crate::limits::MAX_GANG_GPUS {
                return Err(internal("capacity_for did not converge"));
            }
        }
    }
}

/// Preemption and defragmentation count pods, not slices or pods per NUMA group: a slice or
/// `numa="single"` gang, or one with spares, is refused with `InvalidRequest` (docs/shapes.md
/// "Slices", "Inside a node", "Spares") rather than given a plan that breaks its shape.
/// Resources besides GPUs are counted (docs/resources.md "Node resources"), and a fractional
/// gang's shares and fractional victims and movers (docs/preemption.md P8, D5).
pub(crate) fn refuse_unsupported_shapes(request: &GangRequest, call: &str) -> CoreResult<()> {
    if !request.slices.is_empty() {
        return Err(crate::error::invalid(format!(
            "{call} does not take slice gangs yet; place them with place_gang or reserve"
        )));
    }
    if request.spares > 0 {
        return Err(crate::error::invalid(format!(
            "{call} does not take gangs with spares yet; place them with place_gang or reserve"
        )));
    }
    if request.numa == crate::shapes::Numa::Single {
        return Err(crate::error::invalid(format!(
            "{call} does not take numa='single' gangs yet; place them with place_gang or reserve"
        )));
    }
    Ok(())
}
