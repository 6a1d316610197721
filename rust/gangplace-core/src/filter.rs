//! Which nodes a request may use (docs/placement.md, rule 1): labels it selects, the required
//! node affinity it states, and the node taints it tolerates, as Kubernetes defines them.
//!
//! A node admits a [`NodeFilter`] when it carries every selected label, matches at least one
//! affinity term (when there are terms; a term matches when all its requirements do), and
//! every taint of the node with effect `NoSchedule` or `NoExecute` is tolerated (a
//! `PreferNoSchedule` taint never excludes). Everything is kept in a canonical order, so two
//! filters that admit the same nodes by the same terms are equal and hash alike (selector
//! pools are keyed by them).

use serde::{Deserialize, Serialize};

use crate::error::{CoreResult, invalid};
use crate::limits::MAX_NAME_BYTES;

/// The most affinity terms a request may state (Kubernetes sets no limit; 16 is plenty).
pub const MAX_TERMS: usize = 16;
/// The most requirements in one term, and values in one requirement.
pub const MAX_REQUIREMENTS: usize = 32;
/// The most tolerations of a request, and taints of a node.
pub const MAX_TOLERATIONS: usize = 32;

/// How a requirement reads a label (Kubernetes' `NodeSelectorOperator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operator {
    /// The label is present with one of the values.
    In,
    /// The label is absent, or present with none of the values.
    NotIn,
    /// The label is present (no values).
    Exists,
    /// The label is absent (no values).
    DoesNotExist,
    /// The label is an integer greater than the one value.
    Gt,
    /// The label is an integer less than the one value.
    Lt,
}

impl Operator {
    /// The operator of its Kubernetes name.
    pub fn parse(name: &str) -> CoreResult<Self> {
        Ok(match name {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Lt" => Self::Lt,
            other => {
                return Err(invalid(format!(
                    "affinity operator must be In, NotIn, Exists, DoesNotExist, Gt or Lt, got \
                     {other:?}"
                )));
            }
        })
    }

    /// Its Kubernetes name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
        }
    }
}

/// One requirement on a node label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the label is read.
    pub operator: Operator,
    /// The values, sorted and distinct (none for `Exists`/`DoesNotExist`, one integer for
    /// `Gt`/`Lt`).
    pub values: Vec<String>,
}

impl Requirement {
    /// A requirement, checked as the API server checks one.
    pub fn new(key: String, operator: Operator, mut values: Vec<String>) -> CoreResult<Self> {
        checked_text("affinity label key", &key, false)?;
        values.sort();
        values.dedup();
        if values.len() > MAX_REQUIREMENTS {
            return Err(invalid(format!(
                "affinity requirement on {key:?} has more than {MAX_REQUIREMENTS} values"
            )));
        }
        for value in &values {
            checked_text("affinity label value", value, true)?;
        }
        let count = values.len();
        let wrong = match operator {
            Operator::In | Operator::NotIn => count == 0,
            Operator::Exists | Operator::DoesNotExist => count != 0,
            Operator::Gt | Operator::Lt => count != 1 || values[0].parse::<i64>().is_err(),
        };
        if wrong {
            let wanted = match operator {
                Operator::In | Operator::NotIn => "at least one value",
                Operator::Exists | Operator::DoesNotExist => "no values",
                Operator::Gt | Operator::Lt => "exactly one integer value",
            };
            return Err(invalid(format!(
                "affinity requirement {key:?} {} takes {wanted}, got {values:?}",
                operator.as_str()
            )));
        }
        Ok(Self {
            key,
            operator,
            values,
        })
    }

    /// Whether a node whose label `key` reads `label` (`None`: absent) meets it.
    pub fn holds(&self, label: Option<&str>) -> bool {
        let has = |value: &str| {
            self.values
                .binary_search_by(|v| v.as_str().cmp(value))
                .is_ok()
        };
        let number = |value: &str| value.parse::<i64>().ok();
        let bound = || self.values.first().and_then(|value| number(value));
        match (self.operator, label) {
            (Operator::In, Some(value)) => has(value),
            (Operator::In, None) | (Operator::Exists, None) => false,
            (Operator::NotIn, Some(value)) => !has(value),
            (Operator::NotIn, None) | (Operator::DoesNotExist, None) => true,
            (Operator::Exists, Some(_)) => true,
            (Operator::DoesNotExist, Some(_)) => false,
            (Operator::Gt, Some(value)) => {
                matches!((number(value), bound()), (Some(v), Some(b)) if v > b)
            }
            (Operator::Lt, Some(value)) => {
                matches!((number(value), bound()), (Some(v), Some(b)) if v < b)
            }
            (Operator::Gt | Operator::Lt, None) => false,
        }
    }
}

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Effect {
    /// New pods are not placed (a hard exclusion).
    NoSchedule,
    /// New pods avoid the node if they can (never excludes here).
    PreferNoSchedule,
    /// New pods are not placed, and running ones evicted (a hard exclusion here).
    NoExecute,
}

impl Effect {
    /// The effect of its Kubernetes name.
    pub fn parse(name: &str) -> CoreResult<Self> {
        Ok(match name {
            "NoSchedule" => Self::NoSchedule,
            "PreferNoSchedule" => Self::PreferNoSchedule,
            "NoExecute" => Self::NoExecute,
            other => {
                return Err(invalid(format!(
                    "taint effect must be NoSchedule, PreferNoSchedule or NoExecute, got \
                     {other:?}"
                )));
            }
        })
    }

    /// Its Kubernetes name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }

    /// Whether a pod that does not tolerate it may not be placed on the node.
    pub fn excludes(self) -> bool {
        self != Self::PreferNoSchedule
    }
}

/// A node's taint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Taint {
    /// Its key.
    pub key: String,
    /// Its value (may be empty).
    pub value: String,
    /// What it does.
    pub effect: Effect,
}

impl Taint {
    /// A taint, checked.
    pub fn new(key: String, value: String, effect: Effect) -> CoreResult<Self> {
        checked_text("taint key", &key, false)?;
        checked_text("taint value", &value, true)?;
        Ok(Self { key, value, effect })
    }
}

/// A node's taints, sorted and distinct, at most [`MAX_TOLERATIONS`].
pub fn checked_taints(mut taints: Vec<Taint>) -> CoreResult<Vec<Taint>> {
    taints.sort();
    taints.dedup();
    if taints.len() > MAX_TOLERATIONS {
        return Err(invalid(format!(
            "a node has at most {MAX_TOLERATIONS} taints, got {}",
            taints.len()
        )));
    }
    Ok(taints)
}

/// A request's toleration of taints.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Toleration {
    /// The taint key it tolerates; empty with `exists`: every key.
    pub key: String,
    /// `true`: operator `Exists` (any value); `false`: `Equal` (this value).
    pub exists: bool,
    /// The value tolerated with `Equal` (empty with `Exists`).
    pub value: String,
    /// The effect tolerated (`None`: every effect).
    pub effect: Option<Effect>,
}

impl Toleration {
    /// A toleration, checked as the API server checks one.
    pub fn new(
        key: String,
        operator: &str,
        value: String,
        effect: Option<Effect>,
    ) -> CoreResult<Self> {
        let exists = match operator {
            "Exists" => true,
            "Equal" | "" => false,
            other => {
                return Err(invalid(format!(
                    "toleration operator must be Equal or Exists, got {other:?}"
                )));
            }
        };
        if !key.is_empty() {
            checked_text("toleration key", &key, false)?;
        } else if !exists {
            return Err(invalid(
                "a toleration without a key must use operator Exists",
            ));
        }
        checked_text("toleration value", &value, true)?;
        if exists && !value.is_empty() {
            return Err(invalid(format!(
                "a toleration with operator Exists takes no value, got {value:?}"
            )));
        }
        Ok(Self {
            key,
            exists,
            value,
            effect,
        })
    }

    /// Whether it tolerates `taint`.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|effect| effect != taint.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        self.key == taint.key && (self.exists || self.value == taint.value)
    }
}

/// Which nodes a request may use: labels, required affinity, tolerations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeFilter {
    /// Labels every chosen node must carry, sorted by key, keys unique.
    pub labels: Vec<(String, String)>,
    /// Required node affinity: a node matches one term (empty: no affinity).
    pub affinity: Vec<Vec<Requirement>>,
    /// The taints it tolerates, sorted and distinct.
    pub tolerations: Vec<Toleration>,
}

impl NodeFilter {
    /// A filter of labels alone (the `selector` of a request), checked.
    pub fn of_labels(mut labels: Vec<(String, String)>) -> CoreResult<Self> {
        labels.sort();
        if labels.windows(2).any(|pair| pair[0].0 == pair[1].0) {
            return Err(invalid("selector names a label twice"));
        }
        if let Some((key, _)) = labels.iter().find(|(key, value)| {
            key.is_empty() || key.len() > MAX_NAME_BYTES || value.len() > MAX_NAME_BYTES
        }) {
            return Err(invalid(format!(
                "selector label {key:?} is empty or too long"
            )));
        }
        Ok(Self {
            labels,
            ..Self::default()
        })
    }

    /// The same filter with these affinity terms (canonical order; no term may be empty).
    pub fn with_affinity(self, terms: Vec<Vec<Requirement>>) -> CoreResult<Self> {
        if terms.len() > MAX_TERMS {
            return Err(invalid(format!("affinity has more than {MAX_TERMS} terms")));
        }
        let mut affinity = Vec::with_capacity(terms.len());
        for mut term in terms {
            if term.is_empty() {
                return Err(invalid(
                    "an affinity term needs at least one requirement (an empty term matches no \
                     node in Kubernetes)",
                ));
            }
            if term.len() > MAX_REQUIREMENTS {
                return Err(invalid(format!(
                    "an affinity term has more than {MAX_REQUIREMENTS} requirements"
                )));
            }
            term.sort();
            term.dedup();
            affinity.push(term);
        }
        affinity.sort();
        affinity.dedup();
        Ok(Self { affinity, ..self })
    }

    /// The same filter with these tolerations (sorted, distinct, at most 32).
    pub fn with_tolerations(self, mut tolerations: Vec<Toleration>) -> CoreResult<Self> {
        tolerations.sort();
        tolerations.dedup();
        if tolerations.len() > MAX_TOLERATIONS {
            return Err(invalid(format!(
                "a request has at most {MAX_TOLERATIONS} tolerations"
            )));
        }
        Ok(Self {
            tolerations,
            ..self
        })
    }

    /// Whether it admits every untainted node (the cluster's own view serves it).
    pub fn is_plain(&self) -> bool {
        self.labels.is_empty() && self.affinity.is_empty() && self.tolerations.is_empty()
    }

    /// Whether a node of these labels and taints may be used.
    pub fn admits<'a>(&self, label: impl Fn(&str) -> Option<&'a str>, taints: &[Taint]) -> bool {
        self.labels
            .iter()
            .all(|(key, value)| label(key) == Some(value.as_str()))
            && (self.affinity.is_empty()
                || self.affinity.iter().any(|term| {
                    term.iter()
                        .all(|requirement| requirement.holds(label(&requirement.key)))
                }))
            && self.tolerates(taints)
    }

    /// Whether every taint that excludes is tolerated.
    pub fn tolerates(&self, taints: &[Taint]) -> bool {
        taints.iter().all(|taint| {
            !taint.effect.excludes() || self.tolerations.iter().any(|t| t.tolerates(taint))
        })
    }

    /// Whether labels or affinity (not taints) keep a node of these labels out.
    pub fn labels_exclude<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        !self.admits(label, &[])
    }
}

fn checked_text(what: &str, text: &str, may_be_empty: bool) -> CoreResult<()> {
    if (!may_be_empty && text.is_empty()) || text.len() > MAX_NAME_BYTES {
        return Err(invalid(format!(
            "{what} {text:?} is empty or longer than {MAX_NAME_BYTES} bytes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(key: &str, operator: &str, values: &[&str]) -> Requirement {
        let values = values.iter().map(|v| (*v).to_owned()).collect();
        Requirement::new(key.to_owned(), Operator::parse(operator).unwrap(), values).unwrap()
    }

    #[test]
    fn requirements_read_labels_as_kubernetes_does() {
        let zone = requirement("zone", "In", &["a", "b"]);
        assert!(zone.holds(Some("a")) && !zone.holds(Some("c")) && !zone.holds(None));
        let not = requirement("zone", "NotIn", &["a"]);
        assert!(not.holds(None) && not.holds(Some("b")) && !not.holds(Some("a")));
        let gt = requirement("gpus", "Gt", &["4"]);
        assert!(gt.holds(Some("8")) && !gt.holds(Some("4")) && !gt.holds(Some("x")));
        assert!(requirement("x", "Exists", &[]).holds(Some("")));
        assert!(requirement("x", "DoesNotExist", &[]).holds(None));
    }

    #[test]
    fn taints_exclude_unless_tolerated() {
        let taint = Taint::new("dedicated".into(), "a".into(), Effect::NoSchedule).unwrap();
        let soft = Taint::new("x".into(), String::new(), Effect::PreferNoSchedule).unwrap();
        let plain = NodeFilter::default();
        assert!(!plain.tolerates(std::slice::from_ref(&taint)) && plain.tolerates(&[soft]));
        let equal = Toleration::new("dedicated".into(), "Equal", "a".into(), None).unwrap();
        let other = Toleration::new("dedicated".into(), "Equal", "b".into(), None).unwrap();
        let all = Toleration::new(String::new(), "Exists", String::new(), None).unwrap();
        let wrong_effect = Toleration::new(
            "dedicated".into(),
            "Exists",
            String::new(),
            Some(Effect::NoExecute),
        )
        .unwrap();
        assert!(equal.tolerates(&taint) && all.tolerates(&taint));
        assert!(!other.tolerates(&taint) && !wrong_effect.tolerates(&taint));
        assert!(Toleration::new(String::new(), "Equal", String::new(), None).is_err());
    }
}
