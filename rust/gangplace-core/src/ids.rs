//! Identities and GPU sets: the leaf types every other module uses.
//!
//! - [`DomainId`] and [`NodeId`] index the topology's arenas (the root domain is [`ROOT`]).
//! - [`HoldId`] names a reservation or allocation: 128 random bits, written `gp-` and 32
//!   lowercase hex digits. This module is the only place that form is written or read.
//! - [`GpuSet`] is a set of GPU indices on one node, as a 64-bit mask (bit i: GPU i), with
//!   the one parser of user-given index lists.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not};
use std::str::FromStr;

use crate::error::CoreError;
use crate::limits::MAX_GPUS_PER_NODE;

/// Index of a domain in the topology's arena; the root is [`ROOT`].
pub type DomainId = u32;
/// Index of a node in the topology's arena.
pub type NodeId = u32;

/// The root domain, level `cluster`.
pub const ROOT: DomainId = 0;
/// The implicit finest level.
pub const NODE_LEVEL: &str = "node";
/// The implicit root level.
pub const CLUSTER_LEVEL: &str = "cluster";

/// Identity of a reservation or allocation (the allocation keeps its reservation's id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HoldId(u128);

const HOLD_ID_PREFIX: &str = "gp-";

impl HoldId {
    /// The id with these 128 bits.
    pub fn from_bits(bits: u128) -> Self {
        Self(bits)
    }

    /// The id's 128 bits (snapshots store them).
    pub fn bits(self) -> u128 {
        self.0
    }
}

impl fmt::Display for HoldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{HOLD_ID_PREFIX}{:032x}", self.0)
    }
}

/// Parses a user's id. Anything malformed is simply unknown: the error is
/// [`CoreError::UnknownReservation`] with the text as given.
impl FromStr for HoldId {
    type Err = CoreError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let unknown = || CoreError::UnknownReservation(text.to_owned());
        let hex = text.strip_prefix(HOLD_ID_PREFIX).ok_or_else(unknown)?;
        let well_formed =
            hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !well_formed {
            return Err(unknown());
        }
        u128::from_str_radix(hex, 16)
            .map(Self)
            .map_err(|_| unknown())
    }
}

/// A set of GPU indices of one node, `0..64`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct GpuSet(u64);

/// Why a list of GPU indices is not a set of a node's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuIndexError {
    /// The index is negative or not below the node's GPU count.
    OutOfRange(i64),
    /// The index appears twice.
    Repeated(i64),
}

impl GpuSet {
    /// The empty set.
    pub const EMPTY: Self = Self(0);
    /// Every GPU index (0..64): intersected with a node's GPUs, all of them.
    pub const ALL: Self = Self(u64::MAX);

    /// The set with this mask (bit i: GPU i).
    pub fn from_mask(mask: u64) -> Self {
        Self(mask)
    }

    /// The mask (bit i: GPU i).
    pub fn mask(self) -> u64 {
        self.0
    }

    /// GPUs `0..count` (`count` at most 64).
    pub fn first(count: u32) -> Self {
        if count >= 64 {
            Self(u64::MAX)
        } else {
            Self((1u64 << count) - 1)
        }
    }

    /// The set of one GPU (`index < 64`).
    pub fn single(index: u32) -> Self {
        Self(1u64 << index)
    }

    /// The one parser of index lists: every index in `0..gpus`, none repeated.
    pub fn from_indices(
        indices: impl IntoIterator<Item = i64>,
        gpus: u32,
    ) -> Result<Self, GpuIndexError> {
        let limit = gpus.min(MAX_GPUS_PER_NODE);
        let mut set = Self::EMPTY;
        for index in indices {
            let bit = u32::try_from(index).ok().filter(|&bit| bit < limit);
            let bit = bit.ok_or(GpuIndexError::OutOfRange(index))?;
            if set.contains(bit) {
                return Err(GpuIndexError::Repeated(index));
            }
            set |= Self::single(bit);
        }
        Ok(set)
    }

    /// Number of GPUs in the set.
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether GPU `index` is in the set.
    pub fn contains(self, index: u32) -> bool {
        index < 64 && self.0 & (1u64 << index) != 0
    }

    /// Whether the sets share a GPU.
    pub fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    /// The lowest index in the set, if any.
    pub fn lowest(self) -> Option<u32> {
        (self.0 != 0).then(|| self.0.trailing_zeros())
    }

    /// The `count` lowest GPUs of the set (all of them if it has fewer).
    pub fn lowest_n(self, count: u32) -> Self {
        let mut rest = self.0;
        let mut taken = 0u64;
        for _ in 0..count {
            if rest == 0 {
                break;
            }
            let lowest = rest & rest.wrapping_neg();
            taken |= lowest;
            rest &= !lowest;
        }
        Self(taken)
    }

    /// Indices, ascending.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            let index = (rest != 0).then(|| rest.trailing_zeros())?;
            rest &= rest - 1;
            Some(index)
        })
    }

    /// Indices, ascending, as a vector.
    pub fn indices(self) -> Vec<u32> {
        self.iter().collect()
    }
}

impl BitOr for GpuSet {
    type Output = Self;
    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl BitOrAssign for GpuSet {
    fn bitor_assign(&mut self, other: Self) {
        self.0 |= other.0;
    }
}

impl BitAnd for GpuSet {
    type Output = Self;
    fn bitand(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }
}

impl BitAndAssign for GpuSet {
    fn bitand_assign(&mut self, other: Self) {
        self.0 &= other.0;
    }
}

/// The complement within `0..64`; intersect with [`GpuSet::first`] for a node's GPUs.
impl Not for GpuSet {
    type Output = Self;
    fn not(self) -> Self {
        Self(!self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_ids_round_trip_and_reject_garbage() {
        let id = HoldId::from_bits(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let text = id.to_string();
        assert_eq!(text, "gp-0123456789abcdef0123456789abcdef");
        assert_eq!(text.parse::<HoldId>(), Ok(id));
        for garbage in [
            "",
            "gp-",
            "gp-xyz",
            "gp-0123",
            &text.to_uppercase(),
            &text[1..],
        ] {
            assert_eq!(
                garbage.parse::<HoldId>(),
                Err(CoreError::UnknownReservation(garbage.to_owned())),
                "{garbage}"
            );
        }
    }

    #[test]
    fn gpu_sets_parse_once_and_iterate_in_order() {
        let set = GpuSet::from_indices([5, 0, 63], 64).unwrap();
        assert_eq!(set.indices(), vec![0, 5, 63]);
        assert_eq!(set.count(), 3);
        assert_eq!(set.lowest(), Some(0));
        assert_eq!(set.lowest_n(2).indices(), vec![0, 5]);
        assert_eq!(
            GpuSet::from_indices([1, 1], 8),
            Err(GpuIndexError::Repeated(1))
        );
        assert_eq!(
            GpuSet::from_indices([8], 8),
            Err(GpuIndexError::OutOfRange(8))
        );
        assert_eq!(
            GpuSet::from_indices([-1], 8),
            Err(GpuIndexError::OutOfRange(-1))
        );
        assert_eq!(GpuSet::first(64), GpuSet::from_mask(u64::MAX));
        assert_eq!(GpuSet::first(3).indices(), vec![0, 1, 2]);
    }
}
