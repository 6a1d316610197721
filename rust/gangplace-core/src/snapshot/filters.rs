//! The version 11 part of a snapshot (docs/placement.md, rule 1): every node's taints, and the
//! required affinity and tolerations of every live hold's request (and of each multi-role
//! group), the labels they select being in the older parts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use crate::engine::records::{as_snapshot_error, bad};
use crate::error::CoreResult;
use crate::ledger::Hold;
use crate::model::{
    Effect, GangRequest, MultiGangRequest, NodeFilter, Operator, Requirement, Taint, Toleration,
    checked_taints,
};

type TaintRecord = (String, String, String);
type RequirementRecord = (String, String, Vec<String>);
type TolerationRecord = (String, bool, String, Option<String>);

/// One request's affinity terms and tolerations.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct FilterRecord {
    affinity: Vec<Vec<RequirementRecord>>,
    tolerations: Vec<TolerationRecord>,
}

/// A hold's request's filter, and each multi-role group's, in group order.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct HoldFilters {
    request: FilterRecord,
    groups: Vec<FilterRecord>,
}

/// Every node's taints (nodes by name, only tainted ones) and every live hold's filters
/// (holds by id; empty in older formats: no affinity, no tolerations, no taints).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct FilterRecords {
    pub nodes: Vec<(String, Vec<TaintRecord>)>,
    pub holds: Vec<HoldFilters>,
}

fn record_of(filter: &NodeFilter) -> FilterRecord {
    FilterRecord {
        affinity: filter
            .affinity
            .iter()
            .map(|term| {
                term.iter()
                    .map(|r| {
                        (
                            r.key.clone(),
                            r.operator.as_str().to_owned(),
                            r.values.clone(),
                        )
                    })
                    .collect()
            })
            .collect(),
        tolerations: filter
            .tolerations
            .iter()
            .map(|t| {
                let effect = t.effect.map(|effect| effect.as_str().to_owned());
                (t.key.clone(), t.exists, t.value.clone(), effect)
            })
            .collect(),
    }
}

impl Engine {
    /// The version 11 records of this engine.
    pub(crate) fn filter_records(&self) -> FilterRecords {
        let mut nodes: Vec<(String, Vec<TaintRecord>)> = self
            .topology
            .nodes()
            .filter(|(_, node)| !node.taints.is_empty())
            .map(|(_, node)| {
                let taints = node.taints.iter();
                let taints =
                    taints.map(|t| (t.key.clone(), t.value.clone(), t.effect.as_str().into()));
                (node.name.to_string(), taints.collect())
            })
            .collect();
        nodes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let holds = self.ledger.live_holds_by_id().into_iter();
        FilterRecords {
            nodes,
            holds: holds.map(|(_, hold)| hold_filters(hold)).collect(),
        }
    }
}

fn hold_filters(hold: &Hold) -> HoldFilters {
    HoldFilters {
        request: hold
            .request
            .as_deref()
            .map(|request| record_of(&request.filter))
            .unwrap_or_default(),
        groups: hold
            .roles
            .as_deref()
            .map(|roles| roles.groups.iter().map(|g| record_of(&g.filter)).collect())
            .unwrap_or_default(),
    }
}

/// The nodes' taints of a snapshot, checked, by node name.
pub(crate) fn taints_by_node(records: &FilterRecords) -> CoreResult<BTreeMap<String, Vec<Taint>>> {
    let mut out = BTreeMap::new();
    for (name, taints) in &records.nodes {
        let taints = taints
            .iter()
            .map(|(key, value, effect)| {
                Taint::new(key.clone(), value.clone(), Effect::parse(effect)?)
            })
            .collect::<CoreResult<Vec<_>>>()
            .and_then(checked_taints)
            .map_err(as_snapshot_error)?;
        if out.insert(name.clone(), taints).is_some() {
            return Err(bad("a node's taints appear twice"));
        }
    }
    Ok(out)
}

fn applied(request: GangRequest, record: &FilterRecord) -> CoreResult<GangRequest> {
    if record.affinity.is_empty() && record.tolerations.is_empty() {
        return Ok(request);
    }
    let affinity = record
        .affinity
        .iter()
        .map(|term| {
            term.iter()
                .map(|(key, operator, values)| {
                    Requirement::new(key.clone(), Operator::parse(operator)?, values.clone())
                })
                .collect::<CoreResult<Vec<_>>>()
        })
        .collect::<CoreResult<Vec<_>>>();
    let tolerations = record
        .tolerations
        .iter()
        .map(|(key, exists, value, effect)| {
            let effect = effect.as_deref().map(Effect::parse).transpose()?;
            let operator = if *exists { "Exists" } else { "Equal" };
            Toleration::new(key.clone(), operator, value.clone(), effect)
        })
        .collect::<CoreResult<Vec<_>>>();
    affinity
        .and_then(|affinity| request.with_affinity(affinity, tolerations?))
        .map_err(as_snapshot_error)
}

/// A restored hold's request and multi-role request with their version 11 filters.
pub(crate) fn with_filters(
    request: Option<GangRequest>,
    roles: Option<MultiGangRequest>,
    filters: &HoldFilters,
) -> CoreResult<(Option<GangRequest>, Option<MultiGangRequest>)> {
    let request = request.map(|r| applied(r, &filters.request)).transpose()?;
    let roles = match roles {
        Some(mut roles) => {
            if !filters.groups.is_empty() && filters.groups.len() != roles.groups.len() {
                return Err(bad("a hold's group filters do not match its groups"));
            }
            for (group, record) in roles.groups.iter_mut().zip(&filters.groups) {
                *group = applied(group.clone(), record)?;
            }
            Some(roles)
        }
        None if !filters.groups.is_empty() => return Err(bad("group filters without groups")),
        None => None,
    };
    Ok((request, roles))
}
