//! What snapshot format version 5 adds after the shapes (module `snapshot`): per hold, in the
//! body's order, its placement's groups and its multi-role request, validated on restore as a
//! new request would be.

use serde::{Deserialize, Serialize};

use crate::engine::records::{
    RequestRecord, TermsRecord, as_snapshot_error, bad, request_from, request_record,
    slice_records, terms_from, terms_record,
};
use crate::error::CoreResult;
use crate::ledger::Hold;
use crate::model::MultiGangRequest;
use crate::shapes::Spread;

/// One entry per hold of the body.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Roles {
    pub holds: Vec<HoldRoles>,
}

/// A hold's groups (empty for a single gang) and multi-role request.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct HoldRoles {
    groups: Vec<(String, u64)>,
    request: Option<RolesRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RolesRecord {
    /// Each group's request (its name is the group's) and slice layers.
    groups: Vec<(RequestRecord, Vec<(String, i64)>)>,
    required_level: Option<String>,
    colocate: Vec<(String, String, String)>,
    name: String,
    spread: String,
    terms: TermsRecord,
}

/// The roles entry of a live hold.
pub(crate) fn hold_roles(hold: &Hold) -> HoldRoles {
    let request = hold.roles.as_deref().map(|request| RolesRecord {
        groups: request
            .groups
            .iter()
            .map(|group| (request_record(group), slice_records(group)))
            .collect(),
        required_level: request.required_level.clone(),
        colocate: request
            .colocate
            .iter()
            .map(|c| {
                let name = |index: usize| request.groups[index].name.clone();
                (name(c.group), name(c.anchor), c.level.clone())
            })
            .collect(),
        name: request.name.clone(),
        spread: request.spread.as_str().to_owned(),
        terms: terms_record(request.terms),
    });
    HoldRoles {
        groups: hold.placement.groups.clone(),
        request,
    }
}

/// A placement's groups: each group's name and pod count.
type Groups = Vec<(String, u64)>;

/// A restored hold's groups and multi-role request, checked against its `pods` count.
pub(crate) fn roles_from(
    entry: HoldRoles,
    pods: usize,
    group_spares: &[u64],
    group_asks: &[Vec<(String, u64)>],
) -> CoreResult<(Groups, Option<MultiGangRequest>)> {
    let counted: u64 = entry.groups.iter().map(|&(_, count)| count).sum();
    if !entry.groups.is_empty() && counted != pods as u64 {
        return Err(bad("a hold's groups do not add up to its pods"));
    }
    let Some(record) = entry.request else {
        return Ok((entry.groups, None));
    };
    if !group_spares.is_empty() && group_spares.len() != record.groups.len() {
        return Err(bad("a multi-role hold's spares do not match its groups"));
    }
    if !group_asks.is_empty() && group_asks.len() != record.groups.len() {
        return Err(bad("a multi-role hold's resources do not match its groups"));
    }
    let asks_of = |index: usize| {
        let asks = group_asks.get(index).map_or(&[][..], Vec::as_slice);
        crate::resources::as_signed(asks)
    };
    let spares_of = |index: usize| {
        let spares = group_spares.get(index).copied().unwrap_or(0);
        i64::try_from(spares).map_err(|_| bad("a group's spares are out of range"))
    };
    let groups = (record.groups.into_iter().enumerate())
        .map(|(index, (group, slices))| {
            request_from(group)?
                .with_slices(&slices)
                .and_then(|group| group.with_spares(spares_of(index)?))
                .and_then(|group| group.with_resources(asks_of(index)))
                .map_err(as_snapshot_error)
        })
        .collect::<CoreResult<Vec<_>>>()?;
    let spread = Spread::parse(&record.spread).map_err(as_snapshot_error)?;
    let request = MultiGangRequest::new(
        groups,
        record.required_level,
        &record.colocate,
        record.name,
        spread,
    )
    .map_err(as_snapshot_error)?
    .with_terms(terms_from(&record.terms)?);
    let names = request.groups.iter().map(|group| group.name.as_str());
    if !names.eq(entry.groups.iter().map(|(name, _)| name.as_str())) {
        return Err(bad("a multi-role hold's groups do not match its request"));
    }
    Ok((entry.groups, Some(request)))
}
