//! Node filters between Python and the core (docs/placement.md, rule 1): required affinity
//! terms, tolerations and node taints, as tuples both ways.

use gangplace_core as model;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::convert;
use crate::errors::core_to_py;

/// The items of a sequence argument (a str is not a sequence here).
fn items<'py>(value: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a sequence, not str"
        )));
    }
    value
        .try_iter()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must be a sequence, not {}",
                convert::type_name(value)
            ))
        })?
        .collect()
}

/// ``((key, operator, values), ...)`` terms, each a sequence of requirements; for
/// ``Exists``/``DoesNotExist`` a ``(key, operator)`` pair is enough.
pub fn affinity(value: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<model::Requirement>>> {
    let mut terms = Vec::new();
    for (index, term) in items(value, "affinity")?.iter().enumerate() {
        let what = format!("affinity term {index}");
        let mut requirements = Vec::new();
        for requirement in items(term, &what)? {
            let parts = items(&requirement, &what)?;
            if !(2..=3).contains(&parts.len()) {
                return Err(PyTypeError::new_err(format!(
                    "{what}: a requirement is (key, operator, values), got {} items",
                    parts.len()
                )));
            }
            let key = convert::string(&parts[0], "an affinity key")?;
            let operator = convert::string(&parts[1], "an affinity operator")?;
            let values = match parts.get(2) {
                Some(values) => convert::str_sequence(values, "affinity values")?,
                None => Vec::new(),
            };
            let operator = model::Operator::parse(&operator).map_err(core_to_py)?;
            requirements.push(model::Requirement::new(key, operator, values).map_err(core_to_py)?);
        }
        terms.push(requirements);
    }
    Ok(terms)
}

/// ``((key, operator, value, effect), ...)``: operator ``"Equal"`` or ``"Exists"``, effect
/// ``None`` (or ``""``: every effect), ``"NoSchedule"``, ``"PreferNoSchedule"`` or
/// ``"NoExecute"``.
pub fn tolerations(value: &Bound<'_, PyAny>) -> PyResult<Vec<model::Toleration>> {
    let mut out = Vec::new();
    for toleration in items(value, "tolerations")? {
        let parts = items(&toleration, "a toleration")?;
        if parts.len() != 4 {
            return Err(PyTypeError::new_err(format!(
                "a toleration is (key, operator, value, effect), got {} items",
                parts.len()
            )));
        }
        let key = convert::string(&parts[0], "a toleration key")?;
        let operator = convert::string(&parts[1], "a toleration operator")?;
        let value = convert::string(&parts[2], "a toleration value")?;
        let effect = if parts[3].is_none() {
            None
        } else {
            let name = convert::string(&parts[3], "a toleration effect")?;
            (!name.is_empty())
                .then(|| model::Effect::parse(&name))
                .transpose()
                .map_err(core_to_py)?
        };
        out.push(model::Toleration::new(key, &operator, value, effect).map_err(core_to_py)?);
    }
    Ok(out)
}

/// ``((key, value, effect), ...)``.
pub fn taints(value: &Bound<'_, PyAny>) -> PyResult<Vec<model::Taint>> {
    let mut out = Vec::new();
    for taint in items(value, "taints")? {
        let parts = items(&taint, "a taint")?;
        if parts.len() != 3 {
            return Err(PyTypeError::new_err(format!(
                "a taint is (key, value, effect), got {} items",
                parts.len()
            )));
        }
        let key = convert::string(&parts[0], "a taint key")?;
        let value = convert::string(&parts[1], "a taint value")?;
        let effect = convert::string(&parts[2], "a taint effect")?;
        let effect = model::Effect::parse(&effect).map_err(core_to_py)?;
        out.push(model::Taint::new(key, value, effect).map_err(core_to_py)?);
    }
    model::checked_taints(out).map_err(core_to_py)
}

/// The terms as ``((key, operator, (values...)), ...)`` tuples.
pub fn affinity_tuple<'py>(
    py: Python<'py>,
    terms: &[Vec<model::Requirement>],
) -> PyResult<Bound<'py, PyTuple>> {
    let terms = terms.iter().map(|term| {
        let term = term.iter().map(|r| {
            let values = PyTuple::new(py, &r.values)?;
            (r.key.as_str(), r.operator.as_str(), values).into_pyobject(py)
        });
        PyTuple::new(py, term.collect::<PyResult<Vec<_>>>()?)
    });
    PyTuple::new(py, terms.collect::<PyResult<Vec<_>>>()?)
}

/// The tolerations as ``(key, operator, value, effect or None)`` tuples.
pub fn tolerations_tuple<'py>(
    py: Python<'py>,
    tolerations: &[model::Toleration],
) -> PyResult<Bound<'py, PyTuple>> {
    let items = tolerations.iter().map(|t| {
        let operator = if t.exists { "Exists" } else { "Equal" };
        let effect = t.effect.map(model::Effect::as_str);
        (t.key.as_str(), operator, t.value.as_str(), effect).into_pyobject(py)
    });
    PyTuple::new(py, items.collect::<PyResult<Vec<_>>>()?)
}

/// The taints as ``(key, value, effect)`` tuples.
pub fn taints_tuple<'py>(
    py: Python<'py>,
    taints: &[model::Taint],
) -> PyResult<Bound<'py, PyTuple>> {
    let items = taints
        .iter()
        .map(|t| (t.key.as_str(), t.value.as_str(), t.effect.as_str()).into_pyobject(py));
    PyTuple::new(py, items.collect::<PyResult<Vec<_>>>()?)
}

/// ``affinity=...`` and ``tolerations=...`` for a request's repr (nothing when absent).
pub fn repr_parts(py: Python<'_>, filter: &model::NodeFilter) -> PyResult<Vec<String>> {
    let mut parts = Vec::new();
    if !filter.affinity.is_empty() {
        let terms = affinity_tuple(py, &filter.affinity)?;
        parts.push(format!("affinity={}", crate::types::py_repr(py, terms)?));
    }
    if !filter.tolerations.is_empty() {
        let tolerations = tolerations_tuple(py, &filter.tolerations)?;
        parts.push(format!(
            "tolerations={}",
            crate::types::py_repr(py, tolerations)?
        ));
    }
    Ok(parts)
}

/// Puts a request's ``affinity`` and ``tolerations`` into pickling keyword arguments.
pub fn pickle_into(
    py: Python<'_>,
    kwargs: &Bound<'_, pyo3::types::PyDict>,
    filter: &model::NodeFilter,
) -> PyResult<()> {
    kwargs.set_item("affinity", affinity_tuple(py, &filter.affinity)?)?;
    kwargs.set_item("tolerations", tolerations_tuple(py, &filter.tolerations)?)
}
