//! The name of an intra-node level as a placed pod carries it (its affinity, docs/shapes.md "Inside a
//! node").
//!
//! Every pod placed on a node with GPU groups carries one. A shared `Arc<str>` cost every
//! such pod an atomic increment when placed and a decrement when dropped: about 6% of the
//! 64 x 2 `numa="single"` placement of `benches/bench_numa.py` by perf (docs/performance.md).
//! Level names are instead interned once per process, when a node topology naming them is
//! built, and a pod carries a 4-byte code: placing and dropping pods touches no counter.
//!
//! The table only grows: each distinct level name ever given to a `NodeTopology` stays for
//! the life of the process (a handful in practice: `numa`, `pcie`, `nvlink`; each at most
//! [`crate::limits::MAX_NAME_BYTES`] bytes). Reading a name takes a shared lock; only a new
//! name takes it exclusively.

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::{PoisonError, RwLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Every level name interned so far, by code (code `n` is `texts[n - 1]`).
struct Names {
    codes: BTreeMap<&'static str, NonZeroU32>,
    texts: Vec<&'static str>,
}

static NAMES: RwLock<Names> = RwLock::new(Names {
    codes: BTreeMap::new(),
    texts: Vec::new(),
});

/// An intra-node level's name, interned: copies are 4 bytes, equal names have equal codes.
/// Prints, orders and serialises as its text.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelName(NonZeroU32);

impl LevelName {
    /// The name `text`, interned on first use.
    pub fn new(text: &str) -> Self {
        let known = NAMES.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(&code) = known.codes.get(text) {
            return Self(code);
        }
        drop(known);
        let mut names = NAMES.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(&code) = names.codes.get(text) {
            return Self(code);
        }
        // Codes count names from 1; four billion distinct level names are not reachable
        // (each is a NodeTopology level), and the last code is shared past that.
        let next = u32::try_from(names.texts.len() + 1).unwrap_or(u32::MAX);
        let code = NonZeroU32::new(next).unwrap_or(NonZeroU32::MAX);
        let text: &'static str = Box::leak(text.into());
        names.texts.push(text);
        names.codes.insert(text, code);
        Self(code)
    }

    /// The text.
    pub fn as_str(self) -> &'static str {
        let names = NAMES.read().unwrap_or_else(PoisonError::into_inner);
        let index = usize::try_from(self.0.get() - 1).unwrap_or(usize::MAX);
        names.texts.get(index).copied().unwrap_or_default()
    }
}

impl std::ops::Deref for LevelName {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for LevelName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), formatter)
    }
}

impl fmt::Display for LevelName {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl Serialize for LevelName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for LevelName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(Self::new(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_text_and_equal_texts_share_a_code() {
        for text in ["numa", "pcie", "", "a-level-name-of-some-length-0123456789"] {
            let name = LevelName::new(text);
            assert_eq!(name.as_str(), text);
            assert_eq!(name, LevelName::new(text));
            assert_eq!(format!("{name}"), text);
            assert_eq!(format!("{name:?}"), format!("{text:?}"));
            let bytes = postcard::to_allocvec(&name).unwrap_or_default();
            assert_eq!(bytes, postcard::to_allocvec(text).unwrap_or_default());
            let back: Option<LevelName> = postcard::from_bytes(&bytes).ok();
            assert_eq!(back, Some(name));
        }
        assert_ne!(LevelName::new("numa"), LevelName::new("pcie"));
        assert_eq!(size_of::<Option<LevelName>>(), 4);
    }
}
