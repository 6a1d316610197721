//! Extraction of Python arguments into owned Rust values, with the contract's errors:
//! wrong types raise `TypeError`, out-of-range values `InvalidRequest` (never
//! `OverflowError`, never a panic).

use gangplace_core::HoldId;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyMapping, PyString};

use crate::errors::{InvalidRequest, core_to_py};

/// Python type name of `value`, for messages.
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |name| name.to_string())
}

/// An integer argument (anything with `__index__` but `bool`), saturated into `i64`: values
/// beyond it are out of every range anyway, and range checks name the original value.
pub fn int(value: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    if value.is_instance_of::<PyBool>() || value.is_instance_of::<PyFloat>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            type_name(value)
        )));
    }
    let index = if value.is_instance_of::<PyInt>() {
        value.clone()
    } else {
        value.call_method0("__index__").map_err(|_| {
            PyTypeError::new_err(format!("{what} must be an int, not {}", type_name(value)))
        })?
    };
    match index.extract::<i64>() {
        Ok(number) => Ok(number),
        Err(_) => {
            let negative = index.lt(0i64)?;
            Err(InvalidRequest::new_err(format!(
                "{what} is out of range: {}",
                if negative {
                    "hugely negative"
                } else {
                    "hugely positive"
                }
            )))
        }
    }
}

/// Arguments that have a default: unlike an `Option<...>` argument, an explicit `None` is a
/// `TypeError`, as for any other wrong type. Each names itself in the message.
macro_rules! typed_argument {
    ($(#[$doc:meta])* $name:ident($type:ty) = $extract:ident($what:literal)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name(pub $type);

        impl<'a, 'py> FromPyObject<'a, 'py> for $name {
            type Error = PyErr;

            fn extract(value: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
                $extract(&value.to_owned(), $what).map($name)
            }
        }
    };
}

typed_argument!(
    /// `GangRequest(gpus_per_pod=...)`, default 1.
    GpusPerPod(i64) = int("gpus_per_pod")
);
typed_argument!(
    /// `priority=...`, default 0.
    Priority(i64) = int("priority")
);
typed_argument!(
    /// `preemptible=...`, default `True`.
    Preemptible(bool) = boolean("preemptible")
);
typed_argument!(
    /// `movable=...`, default `False`.
    Movable(bool) = boolean("movable")
);

/// A hold id given as a `str`; a malformed one is an unknown reservation.
pub fn hold_id(text: &str) -> PyResult<HoldId> {
    text.parse::<HoldId>().map_err(core_to_py)
}

/// A `str` argument.
pub fn string(value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if !value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a str, not {}",
            type_name(value)
        )));
    }
    value.extract::<String>()
}

/// A real-number argument (int or float, not bool).
pub fn seconds(value: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a number, not bool"
        )));
    }
    if value.is_instance_of::<PyInt>() {
        // Huge ints become inf, which the range check rejects.
        return Ok(value.extract::<f64>().unwrap_or(f64::INFINITY));
    }
    value.extract::<f64>().map_err(|_| {
        PyTypeError::new_err(format!("{what} must be a number, not {}", type_name(value)))
    })
}

/// A `bool` argument.
pub fn boolean(value: &Bound<'_, PyAny>, what: &str) -> PyResult<bool> {
    if !value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a bool, not {}",
            type_name(value)
        )));
    }
    value.extract::<bool>()
}

/// A `Mapping[str, str]` argument, as `(key, value)` pairs.
pub fn str_mapping(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<(String, String)>> {
    let mapping = value.cast::<PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a mapping of str to str, not {}",
            type_name(value)
        ))
    })?;
    let mut pairs = Vec::new();
    for item in mapping.items()?.iter() {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        pairs.push((
            string(&key, &format!("{what} keys"))?,
            string(&value, &format!("{what} values"))?,
        ));
    }
    Ok(pairs)
}

/// A `Mapping[str, int]` of resources (docs/resources.md "Node resources"), as `(name, quantity)`
/// pairs; at most [`gangplace_core::MAX_RESOURCES_PER_NODE`] are read (the core refuses
/// more).
pub fn resource_mapping(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<(String, i64)>> {
    let mapping = value.cast::<PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a mapping of resource name to int, not {}",
            type_name(value)
        ))
    })?;
    let mut pairs = Vec::new();
    for item in mapping.items()?.iter() {
        let (key, quantity): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let name = string(&key, &format!("{what} keys"))?;
        let quantity = int(&quantity, &format!("{what}[{name:?}]"))?;
        pairs.push((name, quantity));
        if pairs.len() > gangplace_core::MAX_RESOURCES_PER_NODE {
            break;
        }
    }
    Ok(pairs)
}

/// A sequence of `str` (a lone `str` is refused rather than split into letters).
pub fn str_sequence(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a sequence of str, not a single str"
        )));
    }
    let iterator = value.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a sequence of str, not {}",
            type_name(value)
        ))
    })?;
    iterator
        .map(|item| string(&item?, &format!("each of {what}")))
        .collect()
}

/// An iterable of ints.
pub fn int_sequence(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
    let iterator = value.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an iterable of int, not {}",
            type_name(value)
        ))
    })?;
    iterator
        .map(|item| int(&item?, &format!("each of {what}")))
        .collect()
}

/// Slice layers: an iterable of `(level, pods_per_slice)` pairs, outermost first.
pub fn slice_layers(value: &Bound<'_, PyAny>) -> PyResult<Vec<(String, i64)>> {
    let expected = "slices must be a sequence of (level, pods_per_slice) pairs";
    if value.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!("{expected}, not a str")));
    }
    let iterator = value
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{expected}, not {}", type_name(value))))?;
    iterator
        .map(|item| {
            let item = item?;
            let pair: Vec<Bound<'_, PyAny>> = match item.is_instance_of::<PyString>() {
                true => Vec::new(),
                false => item
                    .try_iter()
                    .map_or_else(|_| Ok(Vec::new()), Iterator::collect)?,
            };
            let [level, size] = pair.as_slice() else {
                return Err(PyTypeError::new_err(format!(
                    "{expected}; got {}",
                    item.repr()?
                )));
            };
            Ok((
                string(level, "a slice level")?,
                int(size, "pods_per_slice")?,
            ))
        })
        .collect()
}

/// A `NodeTopology` (anything with `levels` and `paths`): level names and per-GPU group ids.
pub fn gpu_topology(value: &Bound<'_, PyAny>) -> PyResult<(Vec<String>, Vec<Vec<u32>>)> {
    let (Ok(levels), Ok(paths)) = (value.getattr("levels"), value.getattr("paths")) else {
        return Err(PyTypeError::new_err(format!(
            "gpu_topology must be a NodeTopology (levels and paths), not {}",
            type_name(value)
        )));
    };
    let levels = str_sequence(&levels, "gpu_topology.levels")?;
    let iterator = paths.try_iter().map_err(|_| {
        PyTypeError::new_err("gpu_topology.paths must be a sequence of group-id sequences")
    })?;
    let paths = iterator
        .map(|path| {
            let ids = int_sequence(&path?, "each GPU's group ids")?;
            ids.into_iter()
                .map(|id| {
                    u32::try_from(id)
                        .ok()
                        .filter(|&id| id <= 63)
                        .ok_or_else(|| {
                            InvalidRequest::new_err(format!(
                                "GPU group ids must be in 0..63, got {id}"
                            ))
                        })
                })
                .collect::<PyResult<Vec<u32>>>()
        })
        .collect::<PyResult<Vec<Vec<u32>>>>()?;
    Ok((levels, paths))
}
