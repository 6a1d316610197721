//! Gang shapes: slices (docs/shapes.md "Slices") and spreads (docs/shapes.md "Balanced spread"). A slice
//! layer asks that every block of `pods_per_slice` consecutive ranks lie in one domain of its
//! level; up to three layers nest, outermost first. A spread says how the pods are split among
//! the children a gang uses.
//!
//! This module holds the request side: the layers as given, their validation when a request
//! is built (sizes), and their resolution against a topology when it is placed (level names
//! to depths, nesting). The search side (slice counts, placing slices) is
//! `search::slices`.

use crate::error::{CoreResult, invalid};
use crate::limits::{MAX_NAME_BYTES, MAX_SLICE_LAYERS};
use crate::topology::Topology;
use serde::{Deserialize, Serialize};

/// How a gang's pods are split among the children it uses inside its domain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Spread {
    /// Rule 4: as few children as possible, the largest filled first (the default).
    #[default]
    Pack,
    /// As many children as pack uses, the largest (then path order), split as evenly as
    /// their capacities allow.
    Balanced,
}

impl Spread {
    /// `"pack"` or `"balanced"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Spread::Pack => "pack",
            Spread::Balanced => "balanced",
        }
    }

    /// Parses `"pack"` or `"balanced"`.
    pub fn parse(name: &str) -> CoreResult<Spread> {
        match name {
            "pack" => Ok(Spread::Pack),
            "balanced" => Ok(Spread::Balanced),
            other => Err(invalid(format!(
                "spread must be 'pack' or 'balanced', got {other:?}"
            ))),
        }
    }
}

/// Whether each pod's GPUs must share a NUMA group (docs/shapes.md "Inside a node").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Numa {
    /// GPUs anywhere on the node (the default).
    #[default]
    None,
    /// Every pod's GPUs in one NUMA group (the level named `numa`, else the outermost; a node
    /// without groups is one), as the kubelet's `single-numa-node` policy demands.
    Single,
}

impl Numa {
    /// `"none"` or `"single"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Numa::None => "none",
            Numa::Single => "single",
        }
    }

    /// Parses `"none"` or `"single"`.
    pub fn parse(name: &str) -> CoreResult<Numa> {
        match name {
            "none" => Ok(Numa::None),
            "single" => Ok(Numa::Single),
            other => Err(invalid(format!(
                "numa must be 'none' or 'single', got {other:?}"
            ))),
        }
    }
}

/// One slice layer of a request: blocks of `pods_per_slice` consecutive ranks in one domain
/// of `level`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SliceLayer {
    /// A level name, or `"node"`.
    pub level: String,
    /// Pods per slice, at least 1.
    pub pods_per_slice: u64,
}

/// Checks the sizes of `layers` for a gang of `pods` (elastic down to `min_pods`): at most
/// [`MAX_SLICE_LAYERS`] layers, each size >= 1 dividing `pods`, each inner size dividing the
/// outer one, `min_pods` a multiple of the outermost size. Level names are checked when the
/// request is placed.
pub fn check_sizes(
    layers: &[(String, i64)],
    pods: u64,
    min_pods: Option<u64>,
) -> CoreResult<Vec<SliceLayer>> {
    if layers.len() > MAX_SLICE_LAYERS {
        return Err(invalid(format!(
            "slices has {} layers; at most {MAX_SLICE_LAYERS} are allowed",
            layers.len()
        )));
    }
    let mut checked: Vec<SliceLayer> = Vec::with_capacity(layers.len());
    for (level, size) in layers {
        if level.is_empty() || level.len() > MAX_NAME_BYTES {
            return Err(invalid(format!(
                "slice level {level:?} is not a level name"
            )));
        }
        let size = u64::try_from(*size)
            .ok()
            .filter(|&size| size >= 1)
            .ok_or_else(|| invalid(format!("pods per slice must be at least 1, got {size}")))?;
        if !pods.is_multiple_of(size) {
            return Err(invalid(format!(
                "pods per slice ({size}) must divide pods ({pods})"
            )));
        }
        if let Some(outer) = checked.last()
            && !outer.pods_per_slice.is_multiple_of(size)
        {
            return Err(invalid(format!(
                "pods per slice of level {level:?} ({size}) must divide the outer layer's ({})",
                outer.pods_per_slice
            )));
        }
        checked.push(SliceLayer {
            level: level.clone(),
            pods_per_slice: size,
        });
    }
    if let (Some(outer), Some(min)) = (checked.first(), min_pods)
        && !min.is_multiple_of(outer.pods_per_slice)
    {
        return Err(invalid(format!(
            "min_pods ({min}) must be a multiple of the outermost pods per slice ({})",
            outer.pods_per_slice
        )));
    }
    Ok(checked)
}

/// Slice layers resolved against a topology: `(depth, pods per slice)`, outermost first.
/// Copy, so that a search demand stays a plain value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layers {
    len: usize,
    layers: [(usize, u64); MAX_SLICE_LAYERS],
}

impl Layers {
    /// No slices.
    pub const NONE: Layers = Layers {
        len: 0,
        layers: [(0, 1); MAX_SLICE_LAYERS],
    };

    /// The layers, outermost first.
    pub fn as_slice(&self) -> &[(usize, u64)] {
        &self.layers[..self.len]
    }

    /// Whether the request has slices.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pods per outermost slice (1 without slices).
    pub fn outer_size(&self) -> u64 {
        self.as_slice().first().map_or(1, |&(_, size)| size)
    }

    /// The innermost layer, if any.
    pub fn innermost(&self) -> Option<(usize, u64)> {
        self.as_slice().last().copied()
    }

    /// Resolves level names to depths: each level known, strictly finer than the one before
    /// it, and none coarser than `coarsest_depth` (the request's `required_level`).
    pub fn resolve(
        topology: &Topology,
        layers: &[SliceLayer],
        coarsest_depth: usize,
    ) -> CoreResult<Layers> {
        let mut resolved = Layers::NONE;
        for layer in layers {
            let depth = topology.depth_of(&layer.level).ok_or_else(|| {
                invalid(format!(
                    "unknown slice level {:?}; the levels are {}",
                    layer.level,
                    level_list(topology)
                ))
            })?;
            if depth < coarsest_depth {
                return Err(invalid(format!(
                    "slice level {:?} is coarser than the required level",
                    layer.level
                )));
            }
            if resolved
                .as_slice()
                .last()
                .is_some_and(|&(outer, _)| depth <= outer)
            {
                return Err(invalid(format!(
                    "slice level {:?} is not finer than the layer outside it; layers go \
                     outermost first",
                    layer.level
                )));
            }
            resolved.layers[resolved.len] = (depth, layer.pods_per_slice);
            resolved.len += 1;
        }
        Ok(resolved)
    }
}

/// The level names, finest first (for messages).
pub fn level_list(topology: &Topology) -> String {
    let levels: Vec<&str> = (0..=topology.node_depth())
        .rev()
        .map(|depth| topology.level_name(depth))
        .collect();
    levels.join(", ")
}
