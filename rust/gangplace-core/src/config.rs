//! What a cluster is configured with, validated once: the level names, the placement policy
//! and the cap on GPUs held per owner.

use std::fmt;
use std::str::FromStr;

use crate::error::{CoreError, CoreResult, invalid};
use crate::ids::{CLUSTER_LEVEL, NODE_LEVEL};
use crate::limits::{MAX_LEVELS, MAX_NAME_BYTES};

/// How to choose among the fitting domains of a level (docs/placement.md, rule 3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Fewest free healthy GPUs, then the fullest parent, grandparent, ..., then smallest
    /// path: packs gangs tightly and keeps empty racks empty.
    #[default]
    BestFit,
    /// Smallest path.
    FirstFit,
    /// Best-fit breaking ties by path alone (the rule before the ancestor tie-break), kept to
    /// measure what the tie-break changes.
    BestFitPath,
}

impl Policy {
    /// Every policy, in the order docs/placement.md lists them.
    pub const ALL: [Policy; 3] = [Policy::BestFit, Policy::FirstFit, Policy::BestFitPath];

    /// The policy's name in the API: `"best-fit"`, `"first-fit"` or `"best-fit-path"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::BestFit => "best-fit",
            Policy::FirstFit => "first-fit",
            Policy::BestFitPath => "best-fit-path",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Policy {
    type Err = CoreError;

    fn from_str(name: &str) -> CoreResult<Self> {
        Policy::ALL
            .into_iter()
            .find(|policy| policy.as_str() == name)
            .ok_or_else(|| {
                invalid(format!(
                    "policy must be 'best-fit', 'first-fit' or 'best-fit-path', not {name:?}"
                ))
            })
    }
}

/// A validated configuration: build one with [`EngineConfig::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    levels: Vec<String>,
    policy: Policy,
    max_held_gpus_per_owner: Option<u64>,
    /// No placement spans more than one domain of this level (`None`: the whole cluster).
    max_level: Option<String>,
}

/// Checks a name against the shared rules: non-empty, at most [`MAX_NAME_BYTES`] bytes.
pub(crate) fn check_name(what: &str, name: &str) -> CoreResult<()> {
    if name.is_empty() {
        return Err(invalid(format!("{what} must not be empty")));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "{what} is {} bytes long; the limit is {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    Ok(())
}

impl EngineConfig {
    /// Validates the levels (outermost first; at most [`MAX_LEVELS`], unique, none named
    /// `node` or `cluster`) and the cap (`>= 0`, `None`: no cap).
    pub fn new(
        levels: Vec<String>,
        policy: Policy,
        max_held_gpus_per_owner: Option<i64>,
    ) -> CoreResult<Self> {
        if levels.len() > MAX_LEVELS {
            return Err(invalid(format!(
                "{} levels given; the limit is {MAX_LEVELS}",
                levels.len()
            )));
        }
        for (index, level) in levels.iter().enumerate() {
            check_name("a level name", level)?;
            if level == NODE_LEVEL || level == CLUSTER_LEVEL {
                return Err(invalid(format!(
                    "level {level:?} is implicit and cannot be declared"
                )));
            }
            if levels[..index].contains(level) {
                return Err(invalid(format!("level {level:?} is given twice")));
            }
        }
        let max_held_gpus_per_owner = max_held_gpus_per_owner
            .map(|cap| {
                u64::try_from(cap).map_err(|_| {
                    invalid(format!("max_held_gpus_per_owner must be >= 0, got {cap}"))
                })
            })
            .transpose()?;
        Ok(Self {
            levels,
            policy,
            max_held_gpus_per_owner,
            max_level: None,
        })
    }

    /// The same configuration where no placement spans more than one domain of `level`
    /// (fabrics that never join: several top switches without a common parent). `"node"`
    /// and the named levels are accepted; `None` and `"cluster"` mean no bound.
    pub fn with_max_level(mut self, level: Option<String>) -> CoreResult<Self> {
        self.max_level = match level {
            None => None,
            Some(level) if level == CLUSTER_LEVEL => None,
            Some(level) if level == NODE_LEVEL || self.levels.contains(&level) => Some(level),
            Some(level) => {
                return Err(invalid(format!(
                    "max_level {level:?} is not a level of this cluster ({})",
                    ["cluster"]
                        .into_iter()
                        .chain(self.levels.iter().map(String::as_str))
                        .chain(["node"])
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        };
        Ok(self)
    }

    /// The level no placement may span more than one domain of (`None`: no bound).
    pub fn max_level(&self) -> Option<&str> {
        self.max_level.as_deref()
    }

    /// Depth of [`Self::max_level`] (0 for the cluster, `levels + 1` for a node).
    pub fn max_level_depth(&self) -> usize {
        match self.max_level.as_deref() {
            None => 0,
            Some(level) if level == NODE_LEVEL => self.levels.len() + 1,
            Some(level) => self
                .levels
                .iter()
                .position(|l| l == level)
                .map_or(0, |i| i + 1),
        }
    }

    /// Level names, outermost first.
    pub fn levels(&self) -> &[String] {
        &self.levels
    }

    /// The placement policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Cap on GPUs held per owner (reserved plus allocated); `None`: no cap.
    pub fn max_held_gpus_per_owner(&self) -> Option<u64> {
        self.max_held_gpus_per_owner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_through_their_names() {
        for policy in Policy::ALL {
            assert_eq!(policy.as_str().parse::<Policy>(), Ok(policy));
        }
        assert!(matches!(
            "worst-fit".parse::<Policy>(),
            Err(CoreError::InvalidRequest(_))
        ));
    }

    #[test]
    fn rejects_bad_levels_and_caps() {
        for levels in [vec!["node"], vec!["cluster"], vec![""], vec!["a", "a"]] {
            let levels = levels.into_iter().map(String::from).collect();
            assert!(EngineConfig::new(levels, Policy::BestFit, None).is_err());
        }
        let many = (0..=MAX_LEVELS).map(|i| format!("l{i}")).collect();
        assert!(EngineConfig::new(many, Policy::BestFit, None).is_err());
        assert!(EngineConfig::new(Vec::new(), Policy::BestFit, Some(-1)).is_err());
        let config = EngineConfig::new(vec!["rack".into()], Policy::FirstFit, Some(8));
        assert_eq!(config.map(|c| c.max_held_gpus_per_owner()), Ok(Some(8)));
    }
}
