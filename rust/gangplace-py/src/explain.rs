//! `Explanation`: why a gang fits or not, as structured fields and a readable `str()`.

use std::sync::Arc;

use gangplace_core::{Explanation as CoreExplanation, LevelExplanation as CoreLevel};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::types::{Placement, py_repr};

/// Why a gang fits where it does, or does not fit (see ``Cluster.explain``).
///
/// ``str()`` gives the summary line, one line per level tried, and the excluded nodes.
#[pyclass(frozen, module = "gangplace._gangplace")]
#[derive(Debug)]
pub struct Explanation {
    pub inner: CoreExplanation,
}

/// One level tried by ``Cluster.explain``: its best domain and what freeing would take.
///
/// ``str()`` gives the line ``str(Explanation)`` prints for it.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LevelExplanation {
    pub inner: CoreLevel,
}

#[pymethods]
impl LevelExplanation {
    /// ``"node"``, a level name, or ``"cluster"``.
    #[getter]
    fn level(&self) -> &str {
        &self.inner.level
    }

    /// Path of the domain holding the most pods, or ``None`` when none holds a pod.
    ///
    /// The node name comes last at level ``node``; the cluster's path is ``()``.
    #[getter]
    fn domain<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.inner
            .domain
            .as_ref()
            .map(|path| PyTuple::new(py, path))
            .transpose()
    }

    /// Pods that domain can hold now.
    #[getter]
    fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// Pods the gang needs.
    #[getter]
    fn needed(&self) -> u64 {
        self.inner.needed
    }

    /// Fewest held GPUs to free there for the gang to fit.
    ///
    /// 0 if it fits, ``None`` if it cannot fit even emptied.
    #[getter]
    fn gpus_to_free(&self) -> Option<u64> {
        self.inner.gpus_to_free
    }

    /// When the gang does not fit: victims ``plan_preemption`` would take here alone.
    ///
    /// ``None`` when it fits, or when no preemption at this level makes room.
    #[getter]
    fn preemption_victims(&self) -> Option<u64> {
        self.inner.preemption.map(|(count, _)| count)
    }

    /// The highest priority among those victims.
    #[getter]
    fn preemption_max_priority(&self) -> Option<i32> {
        self.inner.preemption.map(|(_, priority)| priority)
    }

    /// The domain of this level needing the fewest held GPUs freed for the gang to fit.
    #[getter]
    fn cheapest_domain<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.inner
            .cheapest
            .as_ref()
            .map(|(path, _)| PyTuple::new(py, path))
            .transpose()
    }

    /// How many held GPUs must be freed there (0 when the gang fits there now).
    #[getter]
    fn cheapest_gpus_to_free(&self) -> Option<u64> {
        self.inner.cheapest.as_ref().map(|&(_, gpus)| gpus)
    }

    /// The resource keeping the most nodes of that domain below their free GPUs' pods.
    ///
    /// ``None`` when the request asks no resources besides GPUs, or none binds there.
    #[getter]
    fn limited_by(&self) -> Option<&str> {
        self.inner.limited_by.as_deref()
    }

    fn __str__(&self) -> String {
        level_line(&self.inner)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "LevelExplanation(level={}, domain={}, capacity={}, needed={}, gpus_to_free={}, \
             preemption_victims={}, preemption_max_priority={})",
            py_repr(py, &self.inner.level)?,
            py_repr(py, self.domain(py)?)?,
            self.inner.capacity,
            self.inner.needed,
            py_repr(py, self.inner.gpus_to_free)?,
            py_repr(py, self.preemption_victims())?,
            py_repr(py, self.preemption_max_priority())?
        ))
    }
}

fn level_line(level: &CoreLevel) -> String {
    let domain = match &level.domain {
        Some(path) if path.is_empty() => "the cluster".to_owned(),
        Some(path) => path.join("/"),
        None => "-".to_owned(),
    };
    let freeing = match level.gpus_to_free {
        Some(0) => "fits".to_owned(),
        Some(gpus) => format!("would fit if {gpus} held GPUs there were freed"),
        None if level.domain.is_some() => "cannot fit even if emptied".to_owned(),
        None => "no domain holds a pod".to_owned(),
    };
    let cheapest = match (&level.cheapest, level.gpus_to_free) {
        (Some((path, gpus)), best) if *gpus > 0 && best != Some(*gpus) => {
            let name = if path.is_empty() {
                "the cluster".to_owned()
            } else {
                path.join("/")
            };
            format!("; cheapest: {name}, freeing {gpus} held GPUs")
        }
        _ => String::new(),
    };
    let preempting = match level.preemption {
        Some((1, priority)) => format!("; preempting 1 job of priority {priority} makes room"),
        Some((count, priority)) => {
            format!("; preempting {count} jobs of priority <= {priority} makes room")
        }
        None => String::new(),
    };
    let limited = (level.limited_by.as_ref())
        .map_or_else(String::new, |name| format!(" (limited by {name})"));
    format!(
        "  {:<8} best {:<24} holds {} of {}{limited}; {}{cheapest}{preempting}",
        level.level,
        domain,
        level.capacity,
        if level.needed == 1 {
            "1 pod".to_owned()
        } else {
            format!("{} pods", level.needed)
        },
        freeing
    )
}

#[pymethods]
impl Explanation {
    /// Whether the gang fits now.
    #[getter]
    fn fits(&self) -> bool {
        self.inner.placement.is_some()
    }

    /// Where it would go (what ``place_gang`` answers).
    #[getter]
    fn placement(&self) -> Option<Placement> {
        self.inner
            .placement
            .clone()
            .map(|p| Placement { inner: Arc::new(p) })
    }

    /// One line: where it fits, or ``Unschedulable.reason`` and the cheapest domain.
    ///
    /// The cheapest domain is the one needing the fewest held GPUs freed, when any would do.
    #[getter]
    fn summary(&self) -> &str {
        &self.inner.summary
    }

    /// Multi-role gangs that do not fit: ``(group, why)`` of the first failing group.
    ///
    /// The first group that failed in the first candidate of the coarsest level tried. When
    /// that level had no domain with the unit's GPUs free, the first group (placing order)
    /// that no domain of that level holds even alone, with ``why`` reading ``cannot fit even
    /// alone: the cluster holds 2 of its 3 pods``; ``None`` when the unit fits or every group
    /// fits alone (docs/roles.md, rule 6).
    #[getter]
    fn failed_group(&self) -> Option<(String, String)> {
        self.inner.failed_group.clone()
    }

    /// Levels tried, finest first.
    #[getter]
    fn levels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let levels = self.inner.levels.iter().map(|level| LevelExplanation {
            inner: level.clone(),
        });
        PyTuple::new(py, levels)
    }

    /// Nodes that cannot take one pod, by the first reason that applies.
    ///
    /// Keys: ``cordoned``, ``selector_mismatch`` (a selector label missing, or outside the
    /// required affinity), ``untolerated_taints``, ``unhealthy`` (too few healthy GPUs even if
    /// all were free), ``too_few_free``, ``numa_split`` (``numa="single"``: free GPUs enough,
    /// but no NUMA group holds a pod), ``resources`` (free GPUs enough, too few free
    /// resources besides GPUs for one pod).
    #[getter]
    fn excluded<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let excluded = self.inner.excluded;
        let dict = PyDict::new(py);
        dict.set_item("cordoned", excluded.cordoned)?;
        dict.set_item("selector_mismatch", excluded.selector_mismatch)?;
        dict.set_item("untolerated_taints", excluded.untolerated_taints)?;
        dict.set_item("unhealthy", excluded.unhealthy)?;
        dict.set_item("too_few_free", excluded.too_few_free)?;
        dict.set_item("numa_split", excluded.numa_split)?;
        dict.set_item("resources", excluded.resources)?;
        Ok(dict)
    }

    fn __str__(&self) -> String {
        let mut lines = vec![self.inner.summary.clone()];
        lines.extend(self.inner.levels.iter().map(level_line));
        let excluded = self.inner.excluded;
        lines.push(format!(
            "  excluded nodes: {} cordoned, {} without the selector's labels, {} with too few \
             healthy GPUs for a pod, {} with too few free GPUs, {} with free GPUs split over \
             NUMA groups",
            excluded.cordoned,
            excluded.selector_mismatch,
            excluded.unhealthy,
            excluded.too_few_free,
            excluded.numa_split
        ));
        if excluded.untolerated_taints > 0 {
            let last = lines.len() - 1;
            lines[last] += &format!(
                ", {} with taints it does not tolerate",
                excluded.untolerated_taints
            );
        }
        if excluded.resources > 0 {
            let last = lines.len() - 1;
            lines[last] += &format!(
                ", {} with too few free resources besides GPUs",
                excluded.resources
            );
        }
        lines.join("\n")
    }

    fn __repr__(&self) -> String {
        format!("<Explanation: {}>", self.inner.summary)
    }
}
