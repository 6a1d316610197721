//! numpy in and out: the arguments of `Cluster.from_arrays` and the arrays of `gpu_state`.

use gangplace_core::{GpuSet, GpuState, NodeSpec};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::cluster::Cluster;
use crate::cluster_args::new_engine;
use crate::convert;
use crate::errors::{InvalidRequest, contain};

/// `value` as a numpy array of integers converted to `dtype` ("int64" or "uint64"); floats,
/// bools and objects are refused rather than silently truncated.
fn int_array<'py, T: numpy::Element + Copy>(
    value: &Bound<'py, PyAny>,
    dtype: &str,
    what: &str,
) -> PyResult<Vec<T>> {
    let numpy = value.py().import("numpy")?;
    let array = numpy.call_method1("asarray", (value,))?;
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    if kind != "i" && kind != "u" {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an array of integers, not of dtype {}",
            array.getattr("dtype")?.str()?
        )));
    }
    if dtype == "uint64" && kind == "i" {
        let negative: bool = array
            .call_method1("__lt__", (0,))?
            .call_method0("any")?
            .extract()?;
        if negative {
            return Err(InvalidRequest::new_err(format!(
                "{what} has negative entries"
            )));
        }
    }
    let converted = numpy.call_method1("ascontiguousarray", (array, dtype))?;
    let readonly: PyReadonlyArray1<'py, T> = converted.extract()?;
    Ok(readonly.as_slice()?.to_vec())
}

/// One level's domain names per node: a sequence of names, or `(codes, names)`.
fn level_domains(value: &Bound<'_, PyAny>, level: &str, nodes: usize) -> PyResult<Vec<String>> {
    let what = format!("domains of level {level:?}");
    let domains = match value.cast::<PyTuple>() {
        Ok(pair) if pair.len() == 2 => {
            let codes: Vec<i64> = int_array(&pair.get_item(0)?, "int64", &what)?;
            let table = convert::str_sequence(&pair.get_item(1)?, &what)?;
            codes
                .into_iter()
                .map(|code| {
                    usize::try_from(code)
                        .ok()
                        .and_then(|index| table.get(index).cloned())
                        .ok_or_else(|| {
                            InvalidRequest::new_err(format!(
                                "{what}: code {code} is not in the table of {} names",
                                table.len()
                            ))
                        })
                })
                .collect::<PyResult<Vec<String>>>()?
        }
        _ => convert::str_sequence(value, &what)?,
    };
    if domains.len() != nodes {
        return Err(InvalidRequest::new_err(format!(
            "{what} has {} entries for {nodes} nodes",
            domains.len()
        )));
    }
    Ok(domains)
}

/// Node descriptions from the columns of `Cluster.from_arrays`.
pub fn node_specs(
    levels: &[String],
    names: &Bound<'_, PyAny>,
    domains: &Bound<'_, PyAny>,
    gpus: &Bound<'_, PyAny>,
    unhealthy_mask: &Bound<'_, PyAny>,
    (labels, resources): (Option<&Bound<'_, PyAny>>, Option<&Bound<'_, PyAny>>),
) -> PyResult<Vec<NodeSpec>> {
    let names = convert::str_sequence(names, "names")?;
    let count = names.len();
    let columns: Vec<Bound<'_, PyAny>> = domains.try_iter()?.collect::<PyResult<_>>()?;
    if columns.len() != levels.len() {
        return Err(InvalidRequest::new_err(format!(
            "domains has {} columns for {} levels",
            columns.len(),
            levels.len()
        )));
    }
    let domain_names: Vec<Vec<String>> = levels
        .iter()
        .zip(&columns)
        .map(|(level, column)| level_domains(column, level, count))
        .collect::<PyResult<_>>()?;
    let gpus: Vec<i64> = int_array(gpus, "int64", "gpus")?;
    let masks: Vec<u64> = int_array(unhealthy_mask, "uint64", "unhealthy_mask")?;
    if gpus.len() != count || masks.len() != count {
        return Err(InvalidRequest::new_err(format!(
            "names, gpus and unhealthy_mask must have one entry per node ({count}), got {}, {}",
            gpus.len(),
            masks.len()
        )));
    }
    let label_columns = label_columns(labels, count)?;
    let resource_columns = resource_columns(resources, count)?;
    let mut specs = Vec::with_capacity(count);
    for (index, name) in names.into_iter().enumerate() {
        let topology = levels
            .iter()
            .zip(&domain_names)
            .map(|(level, column)| (level.clone(), column[index].clone()))
            .collect();
        let labels = label_columns
            .iter()
            .filter_map(|(key, values)| Some((key.clone(), values[index].clone()?)))
            .collect();
        let unhealthy = GpuSet::from_mask(masks[index])
            .iter()
            .map(i64::from)
            .collect();
        specs.push(NodeSpec {
            name,
            gpus: gpus[index],
            topology,
            labels,
            unhealthy,
            gpu_topology: None,
            resources: (resource_columns.iter())
                .map(|(name, column)| (name.clone(), column[index]))
                .filter(|&(_, quantity)| quantity != 0)
                .collect(),
            taints: Vec::new(), // taints come with update_node (docs/placement.md, rule 1)
        });
    }
    Ok(specs)
}

type LabelColumn = (String, Vec<Option<String>>);

/// `resources`: a mapping from resource name to one integer quantity per node (0: the node
/// lacks it).
fn resource_columns(
    resources: Option<&Bound<'_, PyAny>>,
    nodes: usize,
) -> PyResult<Vec<(String, Vec<i64>)>> {
    let Some(resources) = resources else {
        return Ok(Vec::new());
    };
    let mapping = resources.cast::<pyo3::types::PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!(
            "resources must be a mapping of resource name to an array, not {}",
            convert::type_name(resources)
        ))
    })?;
    let mut columns = Vec::new();
    for item in mapping.items()?.iter() {
        let (key, column): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let name = convert::string(&key, "resources keys")?;
        let what = format!("resources[{name:?}]");
        let quantities: Vec<i64> = int_array(&column, "int64", &what)?;
        if quantities.len() != nodes {
            return Err(InvalidRequest::new_err(format!(
                "{what} has {} entries for {nodes} nodes",
                quantities.len()
            )));
        }
        columns.push((name, quantities));
    }
    Ok(columns)
}

/// `labels`: a mapping from key to one value per node (`None`: the node lacks the label).
fn label_columns(labels: Option<&Bound<'_, PyAny>>, count: usize) -> PyResult<Vec<LabelColumn>> {
    let Some(labels) = labels.filter(|labels| !labels.is_none()) else {
        return Ok(Vec::new());
    };
    let mapping = labels.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "labels must be a dict of key -> values per node, not {}",
            convert::type_name(labels)
        ))
    })?;
    let mut columns = Vec::with_capacity(mapping.len());
    for (key, values) in mapping.iter() {
        let key = convert::string(&key, "a label key")?;
        let values: Vec<Option<String>> = values
            .try_iter()?
            .map(|value| {
                let value = value?;
                if value.is_none() {
                    Ok(None)
                } else {
                    convert::string(&value, "a label value").map(Some)
                }
            })
            .collect::<PyResult<_>>()?;
        if values.len() != count {
            return Err(InvalidRequest::new_err(format!(
                "label {key:?} has {} values for {count} nodes",
                values.len()
            )));
        }
        columns.push((key, values));
    }
    columns.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(columns)
}

/// `gpu_state` as a dict of numpy arrays: names, counts and masks per node, and per level the
/// domain name of every node (what a rack map needs, in one read).
pub fn gpu_state_dict<'py>(
    py: Python<'py>,
    levels: &[String],
    state: GpuState,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    let numpy = py.import("numpy")?;
    let domains = PyDict::new(py);
    for (depth, level) in levels.iter().enumerate() {
        let column: Vec<&str> = state
            .paths
            .iter()
            .map(|path| path[depth].as_str())
            .collect();
        domains.set_item(level, numpy.call_method1("asarray", (column,))?)?;
    }
    dict.set_item("node", numpy.call_method1("asarray", (state.names,))?)?;
    dict.set_item("domains", domains)?;
    dict.set_item("gpus", PyArray1::from_vec(py, state.gpus))?;
    dict.set_item("free", PyArray1::from_vec(py, state.free))?;
    dict.set_item("reserved", PyArray1::from_vec(py, state.reserved))?;
    dict.set_item("allocated", PyArray1::from_vec(py, state.allocated))?;
    dict.set_item("unhealthy", PyArray1::from_vec(py, state.unhealthy))?;
    dict.set_item("cordoned", PyArray1::from_vec(py, state.cordoned))?;
    dict.set_item("free_mask", PyArray1::from_vec(py, state.free_mask))?;
    dict.set_item("reserved_mask", PyArray1::from_vec(py, state.reserved_mask))?;
    dict.set_item(
        "allocated_mask",
        PyArray1::from_vec(py, state.allocated_mask),
    )?;
    dict.set_item(
        "unhealthy_mask",
        PyArray1::from_vec(py, state.unhealthy_mask),
    )?;
    dict.set_item("shared_mask", PyArray1::from_vec(py, state.shared_mask))?;
    let (resources, free_resources) = (PyDict::new(py), PyDict::new(py));
    for (name, capacity, free) in state.resources {
        resources.set_item(&name, PyArray1::from_vec(py, capacity))?;
        free_resources.set_item(&name, PyArray1::from_vec(py, free))?;
    }
    dict.set_item("resources", resources)?;
    dict.set_item("free_resources", free_resources)?;
    Ok(dict)
}

/// `from_arrays(gpu_topology=...)`: one `NodeTopology` for every node, or `(codes, table)`
/// with one integer code per node into a table of topologies (-1: the node has none).
pub fn set_gpu_topologies(specs: &mut [NodeSpec], value: &Bound<'_, PyAny>) -> PyResult<()> {
    if value.hasattr("levels")? && value.hasattr("paths")? {
        let groups = convert::gpu_topology(value)?;
        for spec in specs.iter_mut() {
            spec.gpu_topology = Some(groups.clone());
        }
        return Ok(());
    }
    let pair: Vec<Bound<'_, PyAny>> = value
        .try_iter()
        .map_err(|_| PyTypeError::new_err("gpu_topology must be a NodeTopology or (codes, table)"))?
        .collect::<PyResult<_>>()?;
    let [codes, table] = pair.as_slice() else {
        return Err(PyTypeError::new_err(
            "gpu_topology must be a NodeTopology or (codes, table)",
        ));
    };
    let codes = convert::int_sequence(codes, "gpu_topology codes")?;
    let table = table
        .try_iter()?
        .map(|entry| convert::gpu_topology(&entry?))
        .collect::<PyResult<Vec<_>>>()?;
    if codes.len() != specs.len() {
        return Err(InvalidRequest::new_err(format!(
            "gpu_topology has {} codes for {} nodes",
            codes.len(),
            specs.len()
        )));
    }
    for (spec, code) in specs.iter_mut().zip(codes) {
        if code == -1 {
            continue;
        }
        let groups = usize::try_from(code).ok().and_then(|code| table.get(code));
        let groups = groups.ok_or_else(|| {
            InvalidRequest::new_err(format!(
                "gpu_topology code {code} of node {:?} is outside its table of {}",
                spec.name,
                table.len()
            ))
        })?;
        spec.gpu_topology = Some(groups.clone());
    }
    Ok(())
}

#[pymethods]
impl Cluster {
    /// Builds a cluster from columns, one entry per node, in one call.
    ///
    /// Args:
    ///     levels: Level names, outermost first.
    ///     names: Node names.
    ///     domains: One column per level: the domain name of every node, either as names or
    ///         as ``(codes, table)`` with integer codes into a table of names.
    ///     gpus: GPUs per node (integers, 1..64).
    ///     unhealthy_mask: Per node, a bitmask of unhealthy GPUs (bit i = GPU i), uint64.
    ///     labels: Label key -> one value per node (``None``: the node lacks that label).
    ///     policy: As for ``Cluster``.
    ///     clock: As for ``Cluster``.
    ///     max_held_gpus_per_owner: As for ``Cluster``.
    ///     max_level: As for ``Cluster``.
    ///     gpu_topology: GPU groups (docs/shapes.md "Inside a node"): one ``NodeTopology`` for
    ///     every
    ///         node, or ``(codes, table)`` with one code per node into a table of
    ///         topologies (-1: the node has none).
    ///     resources: Resource name -> one integer quantity per node (0: the node lacks
    ///         it), as ``add_node``'s ``resources`` (docs/resources.md "Node resources").
    ///
    /// Raises:
    ///     InvalidRequest: Columns of different lengths, codes outside their table, or any
    ///         node ``add_node`` would refuse; no cluster is built.
    ///     TypeError: Non-integer ``gpus`` or masks, non-str names.
    #[staticmethod]
    #[pyo3(signature = (
        levels, names, domains, gpus, unhealthy_mask, labels = None, *,
        policy = None, clock = None, max_held_gpus_per_owner = None, max_level = None,
        gpu_topology = None, resources = None
    ))]
    #[pyo3(
        text_signature = "(levels, names, domains, gpus, unhealthy_mask, labels=None, *, policy='best-fit', clock=None, max_held_gpus_per_owner=None, max_level=None, gpu_topology=None, resources=None)"
    )]
    #[allow(clippy::too_many_arguments)] // the documented signature of from_arrays
    fn from_arrays(
        py: Python<'_>,
        levels: &Bound<'_, PyAny>,
        names: &Bound<'_, PyAny>,
        domains: &Bound<'_, PyAny>,
        gpus: &Bound<'_, PyAny>,
        unhealthy_mask: &Bound<'_, PyAny>,
        labels: Option<&Bound<'_, PyAny>>,
        policy: Option<&Bound<'_, PyAny>>,
        clock: Option<Bound<'_, PyAny>>,
        max_held_gpus_per_owner: Option<&Bound<'_, PyAny>>,
        max_level: Option<&Bound<'_, PyAny>>,
        gpu_topology: Option<&Bound<'_, PyAny>>,
        resources: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let cap = max_held_gpus_per_owner;
        let (mut engine, clock) = new_engine(py, levels, policy, clock, cap, max_level)?;
        let level_names = engine.config().levels();
        let columns = (labels, resources);
        let mut specs = node_specs(level_names, names, domains, gpus, unhealthy_mask, columns)?;
        if let Some(groups) = gpu_topology {
            set_gpu_topologies(&mut specs, groups)?;
        }
        py.detach(|| {
            contain(|| {
                for spec in specs {
                    engine.add_node(spec)?;
                }
                engine.settle();
                Ok(())
            })
        })?;
        Ok(Self::wrap(engine, clock))
    }
}
