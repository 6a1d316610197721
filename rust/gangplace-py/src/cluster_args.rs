//! The arguments of `Cluster`'s methods, extracted from Python into owned Rust values: the
//! constructor's, hold ids, owners, the clock, request sequences.

use gangplace_core::{Engine, EngineConfig, HoldId, Policy};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert;
use crate::errors::core_to_py;
use crate::types::{Allocation, Reservation};

/// A reservation or allocation given as its object or its id.
pub fn hold_id(value: &Bound<'_, PyAny>, what: &str) -> PyResult<HoldId> {
    if let Ok(reservation) = value.cast::<Reservation>() {
        return Ok(reservation.get().inner.id);
    }
    if let Ok(allocation) = value.cast::<Allocation>() {
        return Ok(allocation.get().inner.id);
    }
    if value.is_instance_of::<PyString>() {
        return convert::hold_id(&value.extract::<String>()?);
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a {}, or its id as a str, not {}",
        if what == "allocation" {
            "Allocation"
        } else {
            "Reservation"
        },
        convert::type_name(value)
    )))
}

/// An optional owner name.
pub fn owner(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<String>> {
    match value {
        Some(value) if !value.is_none() => Ok(Some(convert::string(value, "owner")?)),
        _ => Ok(None),
    }
}

/// The clock given, or `time.monotonic`.
pub fn default_clock(py: Python<'_>, clock: Option<Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
    match clock {
        Some(clock) if clock.is_callable() => Ok(clock.unbind()),
        Some(clock) => Err(PyTypeError::new_err(format!(
            "clock must be a callable returning seconds, not {}",
            convert::type_name(&clock)
        ))),
        None => Ok(py.import("time")?.getattr("monotonic")?.unbind()),
    }
}

/// The engine and clock of a new cluster, from the constructor's arguments.
pub fn new_engine(
    py: Python<'_>,
    levels: &Bound<'_, PyAny>,
    policy: Option<&Bound<'_, PyAny>>,
    clock: Option<Bound<'_, PyAny>>,
    max_held_gpus_per_owner: Option<&Bound<'_, PyAny>>,
    max_level: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Engine, Py<PyAny>)> {
    let levels = convert::str_sequence(levels, "levels")?;
    let policy = match policy {
        None => Policy::default(),
        Some(policy) => convert::string(policy, "policy")?
            .parse()
            .map_err(core_to_py)?,
    };
    let cap = max_held_gpus_per_owner
        .filter(|cap| !cap.is_none())
        .map(|cap| convert::int(cap, "max_held_gpus_per_owner"))
        .transpose()?;
    let max_level = max_level
        .filter(|level| !level.is_none())
        .map(|level| convert::string(level, "max_level"))
        .transpose()?;
    let clock = default_clock(py, clock)?;
    let config = EngineConfig::new(levels, policy, cap)
        .and_then(|config| config.with_max_level(max_level))
        .map_err(core_to_py)?;
    Ok((Engine::new(config), clock))
}
