//! The label index: which nodes carry `key=value`, for label selectors.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::ids::NodeId;

/// Label key -> value -> nodes carrying it, by id (so that removing one costs O(log n), not a
/// scan of every node carrying the label; callers sort what they decide on).
#[derive(Debug, Default)]
pub struct LabelIndex {
    nodes_by_label: HashMap<Box<str>, HashMap<Box<str>, BTreeSet<NodeId>>>,
}

impl LabelIndex {
    /// Records the labels of a new node.
    pub fn insert(&mut self, id: NodeId, labels: &BTreeMap<Box<str>, Box<str>>) {
        for (key, value) in labels {
            self.nodes_by_label
                .entry(key.clone())
                .or_default()
                .entry(value.clone())
                .or_default()
                .insert(id);
        }
    }

    /// Forgets the labels of a removed node.
    pub fn remove(&mut self, id: NodeId, labels: &BTreeMap<Box<str>, Box<str>>) {
        for (key, value) in labels {
            let Some(values) = self.nodes_by_label.get_mut(key) else {
                continue;
            };
            if let Some(pool) = values.get_mut(value) {
                pool.remove(&id);
                if pool.is_empty() {
                    values.remove(value);
                }
            }
            if values.is_empty() {
                self.nodes_by_label.remove(key);
            }
        }
    }

    /// The nodes carrying `key=value` (`None` when none do).
    pub fn nodes_with(&self, key: &str, value: &str) -> Option<&BTreeSet<NodeId>> {
        self.nodes_by_label
            .get(key)
            .and_then(|values| values.get(value))
    }
}
