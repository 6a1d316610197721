//! Editing a node in place: its labels, and the spec that would add it again as it is (for
//! `Engine::update_node`, which re-adds a node that holds nothing with a changed structure).

use std::collections::BTreeMap;

use super::{NodeSpec, Topology};
use crate::config::check_name;
use crate::error::{CoreResult, invalid};
use crate::ids::NodeId;
use crate::limits::{MAX_GPUS_PER_NODE, MAX_NAME_BYTES};
use crate::resources::NodeResources;

/// Checks label keys (names) and values (at most [`MAX_NAME_BYTES`] bytes).
pub(crate) fn validate_labels(labels: &[(String, String)]) -> CoreResult<()> {
    for (key, value) in labels {
        check_name("a label key", key)?;
        if value.len() > MAX_NAME_BYTES {
            return Err(invalid(format!(
                "label {key:?} is longer than {MAX_NAME_BYTES} bytes"
            )));
        }
    }
    Ok(())
}

impl Topology {
    /// Resource names and node capacities (docs/resources.md "Node resources").
    pub fn resources(&self) -> &NodeResources {
        &self.resources
    }

    /// Declares resource names no node may have now (a restored snapshot's).
    pub fn declare_resource_names(&mut self, names: &[String]) -> CoreResult<()> {
        self.resources.declare_names(names)
    }

    /// Replaces node `id`'s resources (checked by [`NodeResources::check`] first).
    pub fn set_resources(&mut self, id: NodeId, named: &[(String, u64)]) {
        self.resources.set(id, named);
    }

    /// Replaces a node's labels (checked with [`validate_labels`] first); the label index
    /// follows.
    pub fn set_labels(&mut self, id: NodeId, labels: Vec<(String, String)>) {
        let labels: BTreeMap<Box<str>, Box<str>> = labels
            .into_iter()
            .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
            .collect();
        let node = &mut self.nodes[id as usize];
        self.labels.remove(id, &node.labels);
        self.labels.insert(id, &labels);
        node.labels = labels;
    }

    /// The spec that would add `id` again as it is now, with `unhealthy` as its unhealthy
    /// GPUs.
    pub fn spec_of(&self, id: NodeId, unhealthy: Vec<i64>) -> NodeSpec {
        let node = self.node(id);
        let path = self.domain_path(node.domain);
        NodeSpec {
            name: node.name.to_string(),
            gpus: i64::from(node.gpus),
            topology: self
                .levels
                .iter()
                .map(|level| level.to_string())
                .zip(path.into_iter().map(String::from))
                .collect(),
            labels: node.label_pairs(),
            unhealthy,
            gpu_topology: node
                .gpu_topology
                .as_deref()
                .map(|groups| (groups.levels().to_vec(), groups.paths().to_vec())),
            resources: (self.resources.names())
                .named(self.resources.capacity(id))
                .into_iter()
                .map(|(name, quantity)| (name, i64::try_from(quantity).unwrap_or(i64::MAX)))
                .collect(),
            taints: node.taints.clone(),
        }
    }
}

/// A new node's GPU count: `1..=MAX_GPUS_PER_NODE`, or 0 for a node offering resources
/// besides GPUs (docs/resources.md "Node resources": a node whose GPUs are all MIG slices).
pub(crate) fn checked_gpus(spec: &NodeSpec) -> CoreResult<u32> {
    let fewest = u32::from(!spec.resources.iter().any(|&(_, quantity)| quantity > 0));
    u32::try_from(spec.gpus)
        .ok()
        .filter(|gpus| (fewest..=MAX_GPUS_PER_NODE).contains(gpus))
        .ok_or_else(|| {
            invalid(format!(
                "node {:?}: gpus must be between 1 and {MAX_GPUS_PER_NODE} (0 with resources \
                 besides GPUs), got {}",
                spec.name, spec.gpus
            ))
        })
}
