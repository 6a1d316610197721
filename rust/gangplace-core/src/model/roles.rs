//! Multi-role gangs (docs/roles.md): several pod groups (a leader and its
//! workers, workers of different sizes) placed as one all-or-nothing unit inside one domain,
//! with optional colocations ("every pod of `leader` in the rack of rank 0 of `workers`").
//!
//! This module holds the request side: the groups and colocations as given and their
//! validation when the request is built. Level names are resolved when it is placed
//! (`crate::roles`), which also holds the search.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::error::{CoreResult, invalid};
use crate::limits::{MAX_GANG_GPUS, MAX_NAME_BYTES, MAX_PODS};
use crate::model::{GangRequest, NodeFilter, Terms};
use crate::shapes::Spread;

/// Either kind of request, for the calls that take both (the batches, preemption plans).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AnyRequest {
    /// A single gang.
    Gang(Arc<GangRequest>),
    /// A multi-role gang.
    Roles(Arc<MultiGangRequest>),
}

impl AnyRequest {
    /// The priority and flags of either kind.
    pub fn terms(&self) -> Terms {
        match self {
            AnyRequest::Gang(request) => request.terms,
            AnyRequest::Roles(request) => request.terms,
        }
    }
}

/// Groups in one multi-role gang.
pub const MAX_GROUPS: usize = 16;

/// One colocation: every pod of group `group` lies in the domain of `level` that holds rank 0
/// of group `anchor` (indices into [`MultiGangRequest::groups`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Colocation {
    /// The group that follows.
    pub group: usize,
    /// The group whose rank 0 fixes the domain.
    pub anchor: usize,
    /// `"node"`, a level name, or `"cluster"`.
    pub level: String,
}

/// Several pod groups placed as one unit. Each group is a [`GangRequest`] whose `name` is the
/// group's name and whose `required_level` is unset (the unit's applies); its spread is the
/// unit's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MultiGangRequest {
    /// The groups, in request order (1 to [`MAX_GROUPS`], names unique and non-empty).
    pub groups: Vec<GangRequest>,
    /// Coarsest level the whole unit may span.
    pub required_level: Option<String>,
    /// Colocations, as given.
    pub colocate: Vec<Colocation>,
    /// Free text shown in reasons and reprs.
    pub name: String,
    /// How each group's pods are split among the children it uses.
    pub spread: Spread,
    /// Priority and flags its holds carry.
    pub terms: Terms,
}

impl MultiGangRequest {
    /// The filter of the view candidate domains are ordered over (docs/roles.md, rule 2):
    /// the plain one (the cluster's own view) unless a group tolerates taints; then every
    /// node the tolerations of some group admit (labels and affinity stay each group's).
    pub fn order_filter(&self) -> NodeFilter {
        let tolerations: Vec<_> = self
            .groups
            .iter()
            .flat_map(|group| group.filter.tolerations.iter().cloned())
            .collect();
        let order = NodeFilter::default().with_tolerations(tolerations);
        order.unwrap_or_default() // more than the limit: the plain view (never reached)
    }

    /// Validates the groups (count, names, total size) and the colocations (known, distinct
    /// groups; a level name of 1 to 253 bytes). Each group's own fields were validated when
    /// it was built.
    pub fn new(
        groups: Vec<GangRequest>,
        required_level: Option<String>,
        colocate: &[(String, String, String)],
        name: String,
        spread: Spread,
    ) -> CoreResult<Self> {
        if groups.is_empty() || groups.len() > MAX_GROUPS {
            return Err(invalid(format!(
                "a multi-role gang has 1 to {MAX_GROUPS} groups, got {}",
                groups.len()
            )));
        }
        for (index, group) in groups.iter().enumerate() {
            if group.name.is_empty() {
                return Err(invalid("every group needs a non-empty name"));
            }
            if group.gpu_milli.is_some() {
                return Err(invalid(format!(
                    "group {:?}: multi-role groups take whole GPUs, not fractions of one \
                     (docs/resources.md \"Fractions of a GPU\")",
                    group.name
                )));
            }
            group.check_gpu_less()?; // no GPUs: resources needed (docs/resources.md "Node resources")
            if groups[..index].iter().any(|other| other.name == group.name) {
                return Err(invalid(format!(
                    "group name {:?} is used twice",
                    group.name
                )));
            }
        }
        let pods: u64 = groups
            .iter()
            .map(|group| group.placed_pods(group.pods))
            .sum();
        let gpus: u64 = groups.iter().map(GangRequest::total_gpus).sum();
        if pods > MAX_PODS || gpus > MAX_GANG_GPUS {
            return Err(invalid(format!(
                "the groups take {gpus} GPUs in total; the limit is {MAX_GANG_GPUS}"
            )));
        }
        check_level(required_level.as_deref(), "required_level")?;
        if name.len() > MAX_NAME_BYTES {
            return Err(invalid(format!(
                "name is longer than {MAX_NAME_BYTES} bytes"
            )));
        }
        let colocate = colocate
            .iter()
            .map(|(group, anchor, level)| colocation(&groups, group, anchor, level))
            .collect::<CoreResult<Vec<Colocation>>>()?;
        let groups = groups
            .into_iter()
            .map(|group| group.with_spread(spread))
            .collect();
        Ok(Self {
            groups,
            required_level,
            colocate,
            name,
            spread,
            terms: Terms::default(),
        })
    }

    /// The same request with these terms.
    pub fn with_terms(self, terms: Terms) -> Self {
        Self { terms, ..self }
    }

    /// Group indices in placing order: total GPUs descending, then name.
    pub fn placing_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.groups.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&self.groups[a], &self.groups[b]);
            b.total_gpus()
                .cmp(&a.total_gpus())
                .then_with(|| a.name.cmp(&b.name))
        });
        order
    }

    /// GPUs of every group at full size.
    pub fn total_gpus(&self) -> u64 {
        self.groups.iter().map(GangRequest::total_gpus).sum()
    }

    /// GPUs of every group at its smallest accepted size.
    pub fn min_gpus(&self) -> u64 {
        self.groups.iter().map(GangRequest::min_gpus).sum()
    }

    /// Pods of every group at full size.
    pub fn total_pods(&self) -> u64 {
        self.groups.iter().map(|group| group.pods).sum()
    }

    /// Whether some group accepts fewer pods than it asks for.
    pub fn is_elastic(&self) -> bool {
        self.groups
            .iter()
            .any(|group| group.min_pods.is_some_and(|min| min < group.pods))
    }

    /// The index of the group named `name`.
    pub fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|group| group.name == name)
    }
}

fn check_level(level: Option<&str>, what: &str) -> CoreResult<()> {
    match level {
        Some(level) if level.is_empty() || level.len() > MAX_NAME_BYTES => {
            Err(invalid(format!("{what} {level:?} is not a level name")))
        }
        _ => Ok(()),
    }
}

fn colocation(
    groups: &[GangRequest],
    group: &str,
    anchor: &str,
    level: &str,
) -> CoreResult<Colocation> {
    let index = |name: &str| {
        groups
            .iter()
            .position(|group| group.name == name)
            .ok_or_else(|| invalid(format!("colocate names an unknown group {name:?}")))
    };
    let (group_index, anchor_index) = (index(group)?, index(anchor)?);
    if group_index == anchor_index {
        return Err(invalid(format!(
            "colocate pairs group {group:?} with itself"
        )));
    }
    check_level(Some(level), "colocate level")?;
    Ok(Colocation {
        group: group_index,
        anchor: anchor_index,
        level: level.to_owned(),
    })
}
