//! Snapshots: the whole state of an engine as versioned, self-checking bytes.
//!
//! Layout (all integers little-endian):
//!
//! | bytes | content |
//! |---|---|
//! | 0..8 | magic `GANGPLCE` |
//! | 8..10 | format version (`FORMAT_VERSION`) |
//! | 10..12 | reserved, zero |
//! | 12..20 | body length in bytes |
//! | 20..24 | CRC-32 (IEEE) of the body |
//! | 24.. | body: a postcard encoding of [`Body`] |
//!
//! The body lists nodes sorted by name, live holds sorted by id and remembered ended holds
//! oldest first, so equal states give equal bytes. Reservation deadlines and every hold's
//! start time (`since`) are stored as clock readings together with the clock reading at the
//! snapshot; a restore shifts them by the difference between its own clock reading and that
//! one, keeping each remaining lifetime and each hold's age.
//!
//! Restoring validates everything: the header, the checksum, the encoding, and then the
//! state itself, rebuilt through the same checked operations as a live cluster (names,
//! limits, GPU indices, no GPU held twice, no reservation on an unhealthy GPU). The new
//! engine is returned only when all of it passed: there is never a half-built cluster.

mod body;
mod decode;
mod filters;
mod resources;
mod shares;

use crate::resources::as_signed;

use std::sync::Arc;

use crate::config::{EngineConfig, Policy};
use crate::engine::Engine;
use crate::engine::records::{
    as_snapshot_error, bad, ending_code, ending_from, owner_from, pod_from_record, request_from,
    request_record, slice_records, terms_from, terms_record,
};
use crate::error::CoreResult;
use crate::ids::{GpuSet, HoldId, NodeId};
use crate::ledger::{EndedHold, Hold, HoldState};
use crate::limits::REMEMBERED_ENDED_HOLDS;
use crate::model::{Placement, Taint};
use crate::repair::snapshot::{HoldRepairs, Repairs, hold_repairs, link_from, spares_from};
use crate::roles::snapshot::{HoldRoles, Roles, hold_roles, roles_from};
use crate::shapes::{Numa, Spread};
use crate::state::Changes;
use crate::topology::NodeSpec;
use body::{
    Body, EndedRecord, Endings, Extension, HoldRecord, HoldShape, NodeRecord, NodeShape, Shapes,
};
use decode::decode;

type GpuGroups = Option<(Vec<String>, Vec<Vec<u32>>)>;
/// A hold's multi-role groups' resources (`None`: an older format).
type MaybeGroupAsks = Option<resources::GroupAsks>;

/// First bytes of every snapshot.
pub const MAGIC: &[u8; 8] = b"GANGPLCE";
/// The body format this build writes. Version 2 names the policy (`"best-fit"`) where
/// version 1 stored a flag; version 3 adds the [`Extension`] after the version 2 body
/// (`max_level`); version 4 adds [`Shapes`] after that (slice layers of every hold's request
/// and its placement's slices); version 5 adds the roles of every hold after that (module
/// `roles_snapshot`: multi-role groups and requests); version 6 adds the spares and repair
/// links of every hold after that (module `repair_snapshot`); version 7 adds the ended ranks
/// of every hold after that ([`Endings`], docs/transactions.md "Ending some pods"); version 8 adds node
/// resources and what every hold's pods ask after that (module `resources`, docs/resources.md "Node
/// resources"); version 9 adds the fraction of a GPU every hold's pods use after that
/// (module `shares`, docs/resources.md "Fractions of a GPU"); version 10 adds each multi-role group's
/// resources after that (module `resources`, docs/roles.md); version 11 adds every node's
/// taints and the affinity and tolerations of every hold's requests after that (module
/// `filters`, docs/placement.md rule 1). Versions 2 to 11 are read; version 1 snapshots are
/// refused.
pub const FORMAT_VERSION: u16 = 11;
const OLDEST_READ: u16 = 2;
const HEADER_BYTES: usize = 24;

/// The snapshot bytes of `body`: the header (magic, version, length, CRC-32), then the body.
/// The one writer of the header: snapshots and the fuzz target use it.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + body.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&0u16.to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    bytes.extend_from_slice(body);
    bytes
}

impl Engine {
    /// The whole state as snapshot bytes (after reclaiming expired reservations).
    pub fn snapshot(&mut self, now: f64) -> CoreResult<Vec<u8>> {
        self.reclaim(now);
        let body = self.snapshot_body(now);
        let encoding =
            |error: postcard::Error| crate::error::internal(format!("snapshot encoding: {error}"));
        let mut bytes = postcard::to_stdvec(&body).map_err(encoding)?;
        let extension = Extension {
            max_level: self.config.max_level().map(str::to_owned),
        };
        bytes.extend(postcard::to_stdvec(&extension).map_err(encoding)?);
        let shapes = Shapes {
            holds: self
                .ledger
                .live_holds_by_id()
                .into_iter()
                .map(|(_, hold)| HoldShape {
                    slices: hold.request.as_deref().map_or_else(Vec::new, slice_records),
                    placement_slices: hold.placement.slices.clone(),
                    spread: hold
                        .request
                        .as_deref()
                        .map_or(Spread::Pack, |request| request.spread)
                        .as_str()
                        .to_owned(),
                    numa: hold
                        .request
                        .as_deref()
                        .map_or(Numa::None, |request| request.numa)
                        .as_str()
                        .to_owned(),
                })
                .collect(),
            nodes: self.node_shapes(),
        };
        bytes.extend(postcard::to_stdvec(&shapes).map_err(encoding)?);
        let roles = Roles {
            holds: self
                .ledger
                .live_holds_by_id()
                .into_iter()
                .map(|(_, hold)| hold_roles(hold))
                .collect(),
        };
        bytes.extend(postcard::to_stdvec(&roles).map_err(encoding)?);
        let repairs = Repairs {
            holds: self
                .ledger
                .live_holds_by_id()
                .into_iter()
                .map(|(_, hold)| hold_repairs(hold))
                .collect(),
        };
        bytes.extend(postcard::to_stdvec(&repairs).map_err(encoding)?);
        let endings = Endings {
            holds: (self.ledger.live_holds_by_id().into_iter())
                .map(|(_, hold)| hold.ended.clone())
                .collect(),
        };
        bytes.extend(postcard::to_stdvec(&endings).map_err(encoding)?);
        bytes.extend(postcard::to_stdvec(&self.resource_records()).map_err(encoding)?);
        bytes.extend(postcard::to_stdvec(&self.share_records()).map_err(encoding)?);
        bytes.extend(postcard::to_stdvec(&self.group_resource_records()).map_err(encoding)?);
        bytes.extend(postcard::to_stdvec(&self.filter_records()).map_err(encoding)?);
        Ok(frame(&bytes))
    }

    fn node_shapes(&self) -> Vec<NodeShape> {
        let topology = &self.topology;
        let mut shapes: Vec<NodeShape> = topology
            .nodes()
            .filter_map(|(_, node)| {
                let groups = node.gpu_topology.as_deref()?;
                Some(NodeShape {
                    name: node.name.to_string(),
                    levels: groups.levels().to_vec(),
                    paths: groups.paths().to_vec(),
                })
            })
            .collect();
        shapes.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        shapes
    }

    fn snapshot_body(&self, now: f64) -> Body {
        let topology = &self.topology;
        let name_of = |id: NodeId| topology.node(id).name.to_string();
        let mut nodes: Vec<NodeRecord> = topology
            .nodes()
            .map(|(id, node)| NodeRecord {
                name: node.name.to_string(),
                gpus: node.gpus,
                path: topology
                    .domain_path(node.domain)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                labels: node.label_pairs(),
                cordoned: self.states.get(id).cordoned,
                unhealthy: self.states.get(id).unhealthy.mask(),
            })
            .collect();
        nodes.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let holds = self
            .ledger
            .live_holds_by_id()
            .into_iter()
            .map(|(id, hold)| {
                let mut gpus: Vec<(String, u64)> = hold
                    .gpus_by_node
                    .iter()
                    .map(|&(node, gpus)| (name_of(node), gpus.mask()))
                    .collect();
                gpus.sort_unstable();
                let placement = &hold.placement;
                HoldRecord {
                    id: id.bits(),
                    committed: hold.state == HoldState::Committed,
                    expires_at: hold.expires_at,
                    owner: hold.owner.as_deref().map(str::to_owned),
                    gpus,
                    pods: placement
                        .pods
                        .iter()
                        .map(|pod| (pod.node.to_string(), pod.gpu_indices()))
                        .collect(),
                    level: placement.level.clone(),
                    domain: placement.domain.clone(),
                    terms: terms_record(hold.terms),
                    since: hold.since,
                    request: hold.request.as_deref().map(request_record),
                }
            });
        let ended = self.ledger.ended_in_order().map(|(id, ended)| EndedRecord {
            id: id.bits(),
            ending: ending_code(ended.ending),
            owner: ended.owner.as_deref().map(str::to_owned),
        });
        Body {
            levels: topology
                .levels()
                .iter()
                .map(|level| level.to_string())
                .collect(),
            policy: self.policy().as_str().to_owned(),
            max_held_gpus_per_owner: self.config.max_held_gpus_per_owner(),
            taken_at: now,
            nodes,
            holds: holds.collect(),
            ended: ended.collect(),
        }
    }

    /// Rebuilds an engine from snapshot bytes; `now` is the restoring clock's reading.
    pub fn restore(bytes: &[u8], now: f64) -> CoreResult<Engine> {
        let (body, extension, shapes, roles, repairs, endings, resources, shares, parts) =
            decode(bytes)?;
        let (group_asks, filters) = parts;
        let mut taints = filters::taints_by_node(&filters)?;
        let offset = now - body.taken_at;
        if !offset.is_finite() {
            return Err(bad("the snapshot's clock reading is not finite"));
        }
        let policy: Policy = body.policy.parse().map_err(as_snapshot_error)?;
        let cap = body
            .max_held_gpus_per_owner
            .map(|cap| i64::try_from(cap).map_err(|_| bad("the owner cap is out of range")))
            .transpose()?;
        let levels = body.levels;
        let config = EngineConfig::new(levels.clone(), policy, cap)
            .and_then(|config| config.with_max_level(extension.max_level))
            .map_err(as_snapshot_error)?;
        let mut engine = Engine::new(config);
        let mut groups: std::collections::BTreeMap<String, (Vec<String>, Vec<Vec<u32>>)> = shapes
            .nodes
            .into_iter()
            .map(|node| (node.name, (node.levels, node.paths)))
            .collect();
        let mut node_resources = engine.declared_resources(&resources)?;
        for node in body.nodes {
            let gpu_topology = groups.remove(&node.name);
            let named = node_resources.remove(&node.name).unwrap_or_default();
            let tainted = taints.remove(&node.name).unwrap_or_default();
            engine.restore_node(&levels, node, (gpu_topology, named, tainted))?;
        }
        if !groups.is_empty() || !node_resources.is_empty() || !taints.is_empty() {
            return Err(bad(
                "GPU groups or resources name a node the snapshot does not have",
            ));
        }
        let count = body.holds.len();
        let mut hold_resources = per_hold(resources.holds, count, "hold resources")?;
        let mut group_resources = per_hold(group_asks.holds, count, "groups' resources")?;
        let mut shapes = per_hold(shapes.holds, count, "shapes")?;
        let mut roles = per_hold(roles.holds, count, "roles")?;
        let mut repairs = per_hold(repairs.holds, count, "repair links")?;
        let mut endings = per_hold(endings.holds, count, "ended ranks")?;
        let mut shares = per_hold(shares.holds, count, "fractions")?;
        let mut filters = per_hold(filters.holds, count, "filters")?;
        for hold in body.holds {
            let shape = shapes.next().unwrap_or_default();
            let roles = (roles.next().unwrap_or_default(), group_resources.next());
            let repair = repairs.next().unwrap_or_default();
            let ended = endings.next().unwrap_or_default();
            let uses = (
                hold_resources.next().unwrap_or_default(),
                shares.next().flatten(),
            );
            let filter = filters.next().unwrap_or_default();
            engine.restore_hold(hold, (shape, roles, repair), (ended, uses, filter), offset)?;
        }
        if body.ended.len() > REMEMBERED_ENDED_HOLDS {
            return Err(bad("more ended holds than are ever remembered"));
        }
        for ended in body.ended {
            let id = HoldId::from_bits(ended.id);
            let known = engine.ledger.live(id).is_some() || engine.ledger.ended(id).is_some();
            if known {
                return Err(bad("a hold id appears twice"));
            }
            let record = EndedHold {
                ending: ending_from(ended.ending)?,
                owner: owner_from(ended.owner)?,
            };
            engine.ledger.remember(id, record);
        }
        engine.check_invariants().map_err(as_snapshot_error)?;
        Ok(engine)
    }

    fn restore_node(
        &mut self,
        levels: &[String],
        node: NodeRecord,
        (gpu_topology, resources, taints): (GpuGroups, Vec<(String, u64)>, Vec<Taint>),
    ) -> CoreResult<()> {
        let resources = as_signed(&resources);
        if node.path.len() != levels.len() {
            return Err(bad(format!(
                "node {:?} has a path of the wrong depth",
                node.name
            )));
        }
        let gpus = u64::from(node.gpus.min(64));
        let beyond = if gpus >= 64 { 0 } else { u64::MAX << gpus };
        if node.unhealthy & beyond != 0 {
            return Err(bad(format!(
                "node {:?} marks a GPU it does not have",
                node.name
            )));
        }
        let name = node.name.clone();
        let spec = NodeSpec {
            name: node.name,
            gpus: i64::from(node.gpus),
            topology: levels.iter().cloned().zip(node.path).collect(),
            labels: node.labels,
            unhealthy: GpuSet::from_mask(node.unhealthy)
                .iter()
                .map(i64::from)
                .collect(),
            gpu_topology,
            resources,
            taints,
        };
        self.add_node(spec).map_err(as_snapshot_error)?;
        if node.cordoned {
            self.set_cordoned(&name, true, f64::NEG_INFINITY)
                .map_err(as_snapshot_error)?;
        }
        Ok(())
    }

    fn restore_hold(
        &mut self,
        record: HoldRecord,
        (shape, (roles, group_asks), repairs): (
            HoldShape,
            (HoldRoles, MaybeGroupAsks),
            HoldRepairs,
        ),
        (ended, (asks, gpu_milli), filter): (
            Vec<u64>,
            (resources::HoldResources, Option<u16>),
            filters::HoldFilters,
        ),
        offset: f64,
    ) -> CoreResult<()> {
        let id = HoldId::from_bits(record.id);
        if self.ledger.live(id).is_some() {
            return Err(bad("a hold id appears twice"));
        }
        let committed = record.committed;
        let expires_at = record.expires_at + offset;
        if !committed && !expires_at.is_finite() {
            return Err(bad("a reservation has no finite deadline"));
        }
        let mut gpus_by_node: Vec<(NodeId, GpuSet)> = Vec::with_capacity(record.gpus.len());
        for (name, mask) in &record.gpus {
            let node = self
                .topology
                .node_id(name)
                .ok_or_else(|| bad(format!("a hold names unknown node {name:?}")))?;
            let state = self.states.get(node);
            let gpus = GpuSet::from_mask(*mask);
            let clash = state.reserved | state.allocated | state.shared | !state.gpus;
            let unhealthy = if committed {
                GpuSet::EMPTY
            } else {
                state.unhealthy
            };
            let repeated = gpus_by_node.iter().any(|&(other, _)| other == node);
            if gpus.is_empty() || gpus.intersects(clash | unhealthy) || repeated {
                return Err(bad(format!(
                    "a hold takes GPUs of node {name:?} it cannot hold"
                )));
            }
            gpus_by_node.push((node, gpus));
        }
        gpus_by_node.sort_unstable_by_key(|&(node, _)| node);
        let placement = Placement {
            gpu_milli,
            pods: record
                .pods
                .into_iter()
                .map(|(node, gpus)| {
                    let mut pod = pod_from_record(node, &gpus)?;
                    if let Some(id) = self.topology.node_id(&pod.node) {
                        pod.affinity = self.affinity_of(id, pod.gpus);
                    }
                    Ok(pod)
                })
                .collect::<CoreResult<_>>()?,
            level: record.level,
            domain: record.domain,
            slices: shape.placement_slices,
            groups: Vec::new(),
            spares: Vec::new(),
        };
        let group_asks = group_asks.unwrap_or_default();
        let (groups, roles) = roles_from(
            roles,
            placement.pods.len(),
            &repairs.group_spares,
            &group_asks,
        )?;
        if roles.is_some() && record.request.is_some() {
            return Err(bad("a hold has both a request and a multi-role request"));
        }
        let mut spares = spares_from(&repairs)?;
        for pod in &mut spares {
            if let Some(id) = self.topology.node_id(&pod.node) {
                pod.affinity = self.affinity_of(id, pod.gpus);
            }
        }
        let placement = Placement {
            groups,
            spares,
            ..placement
        };
        let spread = match shape.spread.as_str() {
            "" => Spread::Pack, // entries of older formats, which had no spread
            name => Spread::parse(name).map_err(as_snapshot_error)?,
        };
        let request = record.request.map(request_from).transpose()?;
        let numa = match shape.numa.as_str() {
            "" => Numa::None,
            name => Numa::parse(name).map_err(as_snapshot_error)?,
        };
        let request = request.map(|request| request.with_spread(spread).with_numa(numa));
        let request = match request {
            Some(request) if !shape.slices.is_empty() => Some(
                request
                    .with_slices(&shape.slices)
                    .map_err(as_snapshot_error)?,
            ),
            request if shape.slices.is_empty() => request,
            _ => return Err(bad("a hold without a request has slices")),
        };
        let request = match (request, repairs.request_spares) {
            (request, 0) => request,
            (Some(request), spares) => Some(
                i64::try_from(spares)
                    .map_err(|_| bad("a request's spares are out of range"))
                    .and_then(|spares| request.with_spares(spares).map_err(as_snapshot_error))?,
            ),
            (None, _) => return Err(bad("a hold without a request has spares")),
        };
        let request = match request {
            Some(request) if !asks.request.is_empty() => Some(
                request
                    .with_resources(as_signed(&asks.request))
                    .map_err(as_snapshot_error)?,
            ),
            request => request,
        };
        let request = match (request, gpu_milli) {
            (Some(request), Some(milli)) => {
                Some((request.with_gpu_milli(Some(i64::from(milli)))).map_err(as_snapshot_error)?)
            }
            (request, _) => request,
        };
        let (request, roles) = filters::with_filters(request, roles, &filter)?;
        let counts = (placement.pods.len(), placement.spares.len());
        let pod_resources = self.restored_pod_resources(&asks, counts)?;
        let hold = Hold {
            state: HoldState::Reserved,
            expires_at: if committed {
                record.expires_at
            } else {
                expires_at
            },
            gpus_by_node: gpus_by_node.into(),
            placement: Arc::new(placement),
            owner: owner_from(record.owner)?,
            terms: terms_from(&record.terms)?,
            since: record.since + offset,
            request: request.map(Arc::new),
            roles: roles.map(Arc::new),
            repair: link_from(repairs.link)?,
            ended,
            pod_resources,
            resources_by_node: Vec::new(),
            resources_detached: false,
        };
        let hold = self.with_restored_resources(hold, &asks.nodes)?;
        self.check_ended(&hold, committed)?;
        self.check_restored_shares(&hold, committed)?;
        if committed && hold.repair.is_some() {
            return Err(bad("an allocation has a repair link"));
        }
        if !hold.since.is_finite() {
            return Err(bad("a hold has no finite start time"));
        }
        let mut changes = Changes::new();
        self.ledger.hold(&mut self.states, &mut changes, id, hold);
        if committed {
            let since = hold_since(&self.ledger, id);
            self.ledger
                .commit(&mut self.states, &mut changes, id, since);
        }
        self.apply(&changes);
        Ok(())
    }
}

/// One part's entries, one per hold of the body (none at all: a format without that part).
fn per_hold<T>(entries: Vec<T>, holds: usize, what: &str) -> CoreResult<std::vec::IntoIter<T>> {
    if !entries.is_empty() && entries.len() != holds {
        return Err(bad(format!("the {what} do not match the holds")));
    }
    Ok(entries.into_iter())
}

/// The start time a restored hold was recorded with (commit keeps it).
fn hold_since(ledger: &crate::ledger::Ledger, id: HoldId) -> f64 {
    ledger.live(id).map_or(0.0, |hold| hold.since)
}
