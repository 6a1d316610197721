//! Core errors onto the Python hierarchy of `gangplace.errors`, and panic containment.

use std::panic::{AssertUnwindSafe, catch_unwind};

use gangplace_core::CoreError;
use pyo3::PyErr;

pyo3::import_exception!(gangplace.errors, InvalidRequest);
pyo3::import_exception!(gangplace.errors, UnknownNode);
pyo3::import_exception!(gangplace.errors, Unschedulable);
pyo3::import_exception!(gangplace.errors, ReservationError);
pyo3::import_exception!(gangplace.errors, ReservationExpired);
pyo3::import_exception!(gangplace.errors, ReservationRevoked);
pyo3::import_exception!(gangplace.errors, UnknownReservation);
pyo3::import_exception!(gangplace.errors, Conflict);
pyo3::import_exception!(gangplace.errors, LimitExceeded);
pyo3::import_exception!(gangplace.errors, InvalidSnapshot);
pyo3::import_exception!(gangplace.errors, InternalError);

/// What can come out of a call into the engine, before it becomes a Python exception.
/// Everything here is `Send`, so it can cross `Python::detach`.
#[derive(Debug)]
pub enum CallError {
    /// A typed error of the core.
    Core(CoreError),
    /// The core panicked; the cluster has failed closed.
    Panicked(String),
    /// An earlier panic left the cluster failed closed.
    FailedClosed,
}

impl From<CoreError> for CallError {
    fn from(error: CoreError) -> Self {
        Self::Core(error)
    }
}

/// The one mapping of core errors to Python exceptions: each variant onto the class of its
/// name. No wildcard arm: a new variant in the core does not compile until it is mapped here.
pub fn core_to_py(error: CoreError) -> PyErr {
    let message = error.to_string();
    match error {
        CoreError::InvalidRequest(_) => InvalidRequest::new_err(message),
        CoreError::UnknownNode(name) => UnknownNode::new_err((message, name)),
        CoreError::Unschedulable(_) => Unschedulable::new_err(message),
        CoreError::ReservationExpired(_) => ReservationExpired::new_err(message),
        CoreError::ReservationRevoked(_) => ReservationRevoked::new_err(message),
        CoreError::UnknownReservation(_) => UnknownReservation::new_err(message),
        CoreError::ReservationError(_) => ReservationError::new_err(message),
        CoreError::Conflict(_) => Conflict::new_err(message),
        CoreError::LimitExceeded(_) => LimitExceeded::new_err(message),
        CoreError::InvalidSnapshot(_) => InvalidSnapshot::new_err(message),
        CoreError::InternalError(_) => InternalError::new_err(message),
    }
}

impl From<CallError> for PyErr {
    fn from(error: CallError) -> Self {
        match error {
            CallError::Core(error) => core_to_py(error),
            CallError::Panicked(message) => InternalError::new_err(format!(
                "internal error (the cluster now refuses further calls): {message}"
            )),
            CallError::FailedClosed => {
                InternalError::new_err("the cluster failed closed after an earlier internal error")
            }
        }
    }
}

/// Runs `call`, turning a panic into [`CallError::Panicked`].
pub fn contain<T>(call: impl FnOnce() -> Result<T, CallError>) -> Result<T, CallError> {
    catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        Err(CallError::Panicked(message))
    })
}
