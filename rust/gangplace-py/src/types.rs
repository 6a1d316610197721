//! Frozen, hashable value types. Each wraps the core's owned value and builds Python objects
//! only when an attribute is read.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use gangplace_core::model;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::convert;
use crate::errors::core_to_py;

fn dict<'py>(py: Python<'py>, pairs: &[(String, String)]) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in pairs {
        dict.set_item(key, value)?;
    }
    Ok(dict)
}

/// Python's repr of a str (single quotes).
pub fn py_str(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('\'');
    for character in text.chars() {
        match character {
            '\\' => quoted.push_str("\\\\"),
            '\'' => quoted.push_str("\\'"),
            '\n' => quoted.push_str("\\n"),
            character if character.is_control() => {
                quoted.push_str(&format!("\\x{:02x}", u32::from(character)));
            }
            character => quoted.push(character),
        }
    }
    quoted.push('\'');
    quoted
}

fn repr_pairs(pairs: &[(String, String)]) -> String {
    let items: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}: {}", py_str(k), py_str(v)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

fn repr_tuple<T: std::fmt::Display>(items: &[T]) -> String {
    match items {
        [one] => format!("({one},)"),
        items => format!(
            "({})",
            items
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A gang of `pods` pods with `gpus_per_pod` GPUs each, placed whole or not at all.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GangRequest {
    pub inner: model::GangRequest,
}

#[pymethods]
impl GangRequest {
    #[new]
    #[pyo3(
        text_signature = "(pods, gpus_per_pod=1, *, min_pods=None, required_level=None, selector=None, name='')"
    )]
    #[pyo3(signature = (pods, gpus_per_pod = None, *, min_pods = None, required_level = None, selector = None, name = String::new()))]
    fn new(
        pods: &Bound<'_, PyAny>,
        gpus_per_pod: Option<&Bound<'_, PyAny>>,
        min_pods: Option<&Bound<'_, PyAny>>,
        required_level: Option<&Bound<'_, PyAny>>,
        selector: Option<&Bound<'_, PyAny>>,
        name: String,
    ) -> PyResult<Self> {
        let pods = convert::int(pods, "pods")?;
        let gpus_per_pod = gpus_per_pod.map_or(Ok(1), |g| convert::int(g, "gpus_per_pod"))?;
        let min_pods = min_pods.map(|m| convert::int(m, "min_pods")).transpose()?;
        let required_level = required_level
            .map(|l| convert::string(l, "required_level"))
            .transpose()?;
        let selector = selector.map_or(Ok(Vec::new()), |s| convert::str_mapping(s, "selector"))?;
        let inner =
            model::GangRequest::new(pods, gpus_per_pod, min_pods, required_level, selector, name)
                .map_err(core_to_py)?;
        Ok(Self { inner })
    }

    #[getter]
    fn pods(&self) -> u64 {
        self.inner.pods
    }

    #[getter]
    fn gpus_per_pod(&self) -> u32 {
        self.inner.gpus_per_pod
    }

    #[getter]
    fn min_pods(&self) -> Option<u64> {
        self.inner.min_pods
    }

    #[getter]
    fn required_level(&self) -> Option<&str> {
        self.inner.required_level.as_deref()
    }

    #[getter]
    fn selector<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.selector)
    }

    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Total GPUs of the full gang.
    #[getter]
    fn total_gpus(&self) -> u64 {
        self.inner.total_gpus()
    }

    fn __repr__(&self) -> String {
        let request = &self.inner;
        let mut text = format!("GangRequest({}, {}", request.pods, request.gpus_per_pod);
        if let Some(min) = request.min_pods {
            text += &format!(", min_pods={min}");
        }
        if let Some(level) = &request.required_level {
            text += &format!(", required_level={}", py_str(level));
        }
        if !request.selector.is_empty() {
            text += &format!(", selector={}", repr_pairs(&request.selector));
        }
        if !request.name.is_empty() {
            text += &format!(", name={}", py_str(&request.name));
        }
        text + ")"
    }
}

/// One pod of a placement: a node and the GPU indices it takes there.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodPlacement {
    pub inner: model::PodPlacement,
}

#[pymethods]
impl PodPlacement {
    #[new]
    fn new(node: &Bound<'_, PyAny>, gpus: &Bound<'_, PyAny>) -> PyResult<Self> {
        let node = convert::string(node, "node")?;
        let mut mask = 0u64;
        for gpu in convert::int_sequence(gpus, "gpus")? {
            let bit = u32::try_from(gpu).ok().filter(|&bit| bit < 64);
            let bit = bit.filter(|&bit| mask & (1 << bit) == 0).ok_or_else(|| {
                crate::errors::InvalidRequest::new_err(format!(
                    "GPU indices must be distinct and in 0..64, got {gpu}"
                ))
            })?;
            mask |= 1 << bit;
        }
        Ok(Self {
            inner: model::PodPlacement {
                node: Arc::from(node),
                gpus: mask,
            },
        })
    }

    #[getter]
    fn node(&self) -> &str {
        &self.inner.node
    }

    #[getter]
    fn gpus<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.gpu_indices())
    }

    fn __repr__(&self) -> String {
        format!(
            "PodPlacement({}, {})",
            py_str(&self.inner.node),
            repr_tuple(&self.inner.gpu_indices())
        )
    }
}

/// Where a gang goes: its pods in rank order, the level and the domain chosen.
/// Shares its data with the reservation it came from.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placement {
    pub inner: Arc<model::Placement>,
}

#[pymethods]
impl Placement {
    #[getter]
    fn pods<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let pods = self
            .inner
            .pods
            .iter()
            .map(|pod| PodPlacement { inner: pod.clone() });
        PyTuple::new(py, pods)
    }

    #[getter]
    fn level(&self) -> &str {
        &self.inner.level
    }

    #[getter]
    fn domain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.domain)
    }

    #[getter]
    fn nodes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.nodes())
    }

    /// Total GPUs placed.
    #[getter]
    fn total_gpus(&self) -> usize {
        self.inner
            .pods
            .iter()
            .map(|pod| pod.gpu_count() as usize)
            .sum()
    }

    fn __len__(&self) -> usize {
        self.inner.pods.len()
    }

    /// Notebooks show the pods and their GPUs (see `gangplace.pictures`).
    fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
        let pictures = slf.py().import("gangplace.pictures")?;
        pictures.call_method1("placement_svg", (slf,))?.extract()
    }

    fn __repr__(&self) -> String {
        let pods: Vec<String> = self
            .inner
            .pods
            .iter()
            .map(|pod| {
                let gpus = repr_tuple(&pod.gpu_indices());
                format!("({}, {})", py_str(&pod.node), gpus)
            })
            .collect();
        let domain: Vec<String> = self.inner.domain.iter().map(|d| py_str(d)).collect();
        format!(
            "Placement(level={}, domain={}, pods=[{}])",
            py_str(&self.inner.level),
            repr_tuple(&domain),
            pods.join(", ")
        )
    }
}

fn repr_owner(owner: Option<&str>) -> String {
    owner.map_or_else(|| "None".to_owned(), py_str)
}

/// A hold on a placement's GPUs until `expires_at` (seconds of the cluster's clock).
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone)]
pub struct Reservation {
    pub inner: model::Reservation,
}

impl PartialEq for Reservation {
    fn eq(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
            && self.inner.placement == other.inner.placement
            && self.inner.expires_at.to_bits() == other.inner.expires_at.to_bits()
            && self.inner.owner == other.inner.owner
    }
}

impl Eq for Reservation {}

impl Hash for Reservation {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.id.hash(state);
        self.inner.placement.hash(state);
        self.inner.expires_at.to_bits().hash(state);
        self.inner.owner.hash(state);
    }
}

#[pymethods]
impl Reservation {
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    #[getter]
    fn placement(&self) -> Placement {
        Placement {
            inner: Arc::clone(&self.inner.placement),
        }
    }

    #[getter]
    fn expires_at(&self) -> f64 {
        self.inner.expires_at
    }

    #[getter]
    fn owner(&self) -> Option<&str> {
        self.inner.owner.as_deref()
    }

    fn __repr__(&self) -> String {
        format!(
            "Reservation(id={}, expires_at={}, owner={}, placement={})",
            py_str(&self.inner.id),
            self.inner.expires_at,
            repr_owner(self.inner.owner.as_deref()),
            self.placement().__repr__()
        )
    }
}

/// A committed reservation: GPUs held until `release`.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Allocation {
    pub inner: model::Allocation,
}

#[pymethods]
impl Allocation {
    #[getter]
    fn id(&self) -> &str {
        &self.inner.id
    }

    #[getter]
    fn placement(&self) -> Placement {
        Placement {
            inner: Arc::clone(&self.inner.placement),
        }
    }

    #[getter]
    fn owner(&self) -> Option<&str> {
        self.inner.owner.as_deref()
    }

    fn __repr__(&self) -> String {
        format!(
            "Allocation(id={}, owner={}, placement={})",
            py_str(&self.inner.id),
            repr_owner(self.inner.owner.as_deref()),
            self.placement().__repr__()
        )
    }
}

/// One node's description and GPU state.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeInfo {
    pub inner: model::NodeInfo,
}

#[pymethods]
impl NodeInfo {
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    #[getter]
    fn gpus(&self) -> u32 {
        self.inner.gpus
    }

    #[getter]
    fn topology<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.topology)
    }

    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        dict(py, &self.inner.labels)
    }

    #[getter]
    fn cordoned(&self) -> bool {
        self.inner.cordoned
    }

    #[getter]
    fn free<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.free)
    }

    #[getter]
    fn reserved<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.reserved)
    }

    #[getter]
    fn allocated<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.allocated)
    }

    #[getter]
    fn unhealthy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.unhealthy)
    }

    fn __repr__(&self) -> String {
        let node = &self.inner;
        format!(
            "NodeInfo({}, gpus={}, topology={}, cordoned={}, free={}, reserved={}, allocated={}, unhealthy={})",
            py_str(&node.name),
            node.gpus,
            repr_pairs(&node.topology),
            if node.cordoned { "True" } else { "False" },
            repr_tuple(&node.free),
            repr_tuple(&node.reserved),
            repr_tuple(&node.allocated),
            repr_tuple(&node.unhealthy)
        )
    }
}

/// GPU counts over the whole cluster.
#[pyclass(frozen, eq, hash, module = "gangplace._gangplace")]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterStats {
    pub inner: model::ClusterStats,
}

#[pymethods]
impl ClusterStats {
    #[getter]
    fn total(&self) -> u64 {
        self.inner.total
    }

    #[getter]
    fn healthy(&self) -> u64 {
        self.inner.healthy
    }

    #[getter]
    fn free(&self) -> u64 {
        self.inner.free
    }

    #[getter]
    fn reserved(&self) -> u64 {
        self.inner.reserved
    }

    #[getter]
    fn allocated(&self) -> u64 {
        self.inner.allocated
    }

    #[getter]
    fn unhealthy(&self) -> u64 {
        self.inner.unhealthy
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "ClusterStats(total={}, healthy={}, free={}, reserved={}, allocated={}, unhealthy={})",
            s.total, s.healthy, s.free, s.reserved, s.allocated, s.unhealthy
        )
    }
}
