//! What snapshot version 8 adds after version 7's ended ranks: node resources and what each
//! hold's pods ask (docs/resources.md "Node resources"). Names, not ids, so equal states give equal
//! bytes whatever order the names were first declared in.

use serde::{Deserialize, Serialize};

use crate::engine::Engine;
use std::collections::BTreeMap;

use crate::engine::records::{as_snapshot_error, bad};
use crate::error::CoreResult;
use crate::ids::NodeId;
use crate::ledger::Hold;
use crate::resources::Amounts;

/// From version 8: every node's resources and every live hold's, in body order.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct ResourceRecords {
    /// Every resource name the cluster knows, sorted (also those of removed nodes).
    pub names: Vec<String>,
    /// Nodes with resources, sorted by name: the node's name and its `(name, quantity)`s.
    pub nodes: Vec<(String, Vec<(String, u64)>)>,
    /// Per live hold (sorted by id): what its pods ask (empty, one for all, or per rank).
    pub holds: Vec<HoldResources>,
}

/// One hold's resources.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct HoldResources {
    /// Its request's `resources_per_pod` (empty without).
    pub request: Vec<(String, u64)>,
    /// What its pods ask, by name: empty, one entry for all, or one per rank.
    pub pods: Vec<Vec<(String, u64)>>,
    /// The nodes where it uses resources, by name (pods without GPUs run there).
    pub nodes: Vec<String>,
}

/// Each multi-role group's `resources_per_pod` of one hold (empty for a single gang).
pub(crate) type GroupAsks = Vec<Vec<(String, u64)>>;

/// From version 10: per live hold (body order), each multi-role group's `resources_per_pod`
/// (docs/roles.md).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct GroupResourceRecords {
    pub holds: Vec<GroupAsks>,
}

impl Engine {
    /// The version 10 records of this engine.
    pub(crate) fn group_resource_records(&self) -> GroupResourceRecords {
        let holds = self.ledger.live_holds_by_id().into_iter();
        let groups = |hold: &Hold| {
            let groups = hold.roles.as_deref().map(|roles| &roles.groups[..]);
            let groups = groups.unwrap_or_default().iter();
            groups.map(|group| group.resources.clone()).collect()
        };
        GroupResourceRecords {
            holds: holds.map(|(_, hold)| groups(hold)).collect(),
        }
    }

    /// The version 8 records of this engine.
    pub(crate) fn resource_records(&self) -> ResourceRecords {
        let names = self.topology.resources().names();
        let mut nodes: Vec<(String, Vec<(String, u64)>)> = (self.topology.nodes())
            .map(|(id, node)| {
                let capacity = self.topology.resources().capacity(id);
                (node.name.to_string(), names.named(capacity))
            })
            .filter(|(_, named)| !named.is_empty())
            .collect();
        nodes.sort_unstable();
        let holds = (self.ledger.live_holds_by_id().into_iter())
            .map(|(_, hold)| HoldResources {
                request: (hold.request.as_deref())
                    .map_or_else(Vec::new, |request| request.resources.clone()),
                pods: hold.pod_resources.iter().map(|a| names.named(a)).collect(),
                nodes: (hold.resources_by_node.iter())
                    .map(|&(node, _)| self.topology.node(node).name.to_string())
                    .collect(),
            })
            .collect();
        ResourceRecords {
            names: names.all().map(str::to_owned).collect(),
            nodes,
            holds,
        }
    }

    /// What the pods of a restored hold ask, checked against its placement and the
    /// cluster's names.
    pub(crate) fn restored_pod_resources(
        &self,
        record: &HoldResources,
        (hold_pods, hold_spares): (usize, usize),
    ) -> CoreResult<std::sync::Arc<[Amounts]>> {
        let names = self.topology.resources().names();
        let mut pods = Vec::with_capacity(record.pods.len());
        for named in &record.pods {
            let amounts = names
                .resolve(named)
                .map_err(|_| bad("a hold names an unknown resource"))?;
            pods.push(amounts);
        }
        // One for all, or per rank (then per spare: a multi-role hold's).
        if pods.len() > 1 && pods.len() != hold_pods && pods.len() != hold_pods + hold_spares {
            return Err(bad("a hold's resources do not match its pods"));
        }
        Ok(std::sync::Arc::from(pods))
    }
}

impl Engine {
    /// `hold` with its use per node: on the nodes where it holds GPUs or, by the record,
    /// resources; a pod of it without GPUs elsewhere was lost with its node.
    pub(crate) fn with_restored_resources(
        &self,
        mut hold: Hold,
        nodes: &[String],
    ) -> CoreResult<Hold> {
        let mut ids = Vec::with_capacity(nodes.len());
        for name in nodes {
            let id = (self.topology.node_id(name))
                .ok_or_else(|| bad(format!("a hold uses resources of unknown node {name:?}")))?;
            ids.push(id);
        }
        let member = |node: NodeId| {
            ids.contains(&node) || hold.gpus_by_node.iter().any(|&(on, _)| on == node)
        };
        hold.resources_by_node =
            self.resources_by_node(&hold.placement, &hold.pod_resources, &hold.ended, &member);
        let live = (0u64..).zip(&hold.placement.pods);
        hold.resources_detached = !hold.pod_resources.is_empty()
            && live
                .filter(|(rank, _)| hold.ended.binary_search(rank).is_err())
                .any(|(_, pod)| {
                    self.topology
                        .node_id(&pod.node)
                        .is_none_or(|node| !member(node))
                });
        Ok(hold)
    }

    /// Declares a snapshot's resource names; each node's resources by node name.
    pub(crate) fn declared_resources(
        &mut self,
        records: &ResourceRecords,
    ) -> CoreResult<BTreeMap<String, Vec<(String, u64)>>> {
        (self.topology)
            .declare_resource_names(&records.names)
            .map_err(as_snapshot_error)?;
        Ok(records.nodes.iter().cloned().collect())
    }
}
