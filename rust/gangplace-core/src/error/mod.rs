//! The one error type of the core. Each variant is named like the Python exception it becomes
//! (`gangplace.errors`); the binding maps them with one exhaustive `match`, so adding a
//! variant here is a compile error there until it is mapped.

pub(crate) mod texts;

use thiserror::Error;

/// Everything that can go wrong in a core operation. A failed operation leaves the
/// engine exactly as it was: every mutation is computed first and applied afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CoreError {
    /// The arguments break the contract (bad level, out-of-range count, duplicate name...).
    #[error("{0}")]
    InvalidRequest(String),
    /// No node carries that name.
    #[error("unknown node {0:?}")]
    UnknownNode(String),
    /// `reserve` found no placement; the text says what the best domain of each level could hold.
    #[error("{0}")]
    Unschedulable(String),
    /// The reservation's lifetime ran out before `commit`.
    #[error("reservation {0} expired")]
    ReservationExpired(String),
    /// The reservation was revoked because one of its GPUs became unhealthy.
    #[error("reservation {0} was revoked")]
    ReservationRevoked(String),
    /// No reservation or allocation has that id (or it ended too long ago to be remembered).
    #[error("unknown reservation {0:?}")]
    UnknownReservation(String),
    /// The id exists but the operation does not apply to its state (rollback of a committed
    /// reservation, commit of a rolled-back one, release of an uncommitted one...).
    #[error("{0}")]
    ReservationError(String),
    /// `reserve` of an earlier placement: one of its GPUs is no longer free, healthy and on an
    /// uncordoned node (or its node is gone). Nothing was held.
    #[error("{0}")]
    Conflict(String),
    /// A size limit of the cluster or an owner's cap on held GPUs would be exceeded.
    #[error("{0}")]
    LimitExceeded(String),
    /// Snapshot bytes that are truncated, corrupted, of another format version, or
    /// describe an impossible state.
    #[error("invalid snapshot: {0}")]
    InvalidSnapshot(String),
    /// The engine found itself inconsistent (a bug). The binding fails closed on it.
    #[error("internal error: {0}")]
    InternalError(String),
}

/// Shorthand for core results.
pub type CoreResult<T> = Result<T, CoreError>;

pub(crate) fn invalid(message: impl Into<String>) -> CoreError {
    CoreError::InvalidRequest(message.into())
}

pub(crate) fn internal(message: impl Into<String>) -> CoreError {
    CoreError::InternalError(message.into())
}
