//! Rule 3's winner among equally free nodes, remembered per domain (issue 29): for every
//! domain and free count `k`, the node that best-fit's ancestor tie-break picks among the
//! domain's nodes with exactly `k` free GPUs (fewest free GPUs in its parent, then its
//! grandparent, ... up to the domain, then path order). A domain's answer is built from its
//! children's, so after a change only the changed nodes' ancestors are computed again: a
//! one-pod gang no longer walks a run of equally free racks, whatever the cluster's size.
//!
//! Each domain carries a generation, moved on to the next whenever the domain is touched by
//! a mutation (propagate calls `domain_moved` for every touched domain); a remembered answer
//! holds only while its generation is the domain's. Answers are kept in atomics so that a
//! search, which reads the index through `&self`, can fill them in.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::ids::{DomainId, NodeId};
use crate::limits::MAX_GPUS_PER_NODE;

const COUNTS: usize = MAX_GPUS_PER_NODE as usize + 1;

/// Per domain slot: its generation and, lazily, one remembered answer per free count. Nothing
/// is allocated until the first answer is remembered, so a what-if copy of the index (which
/// starts with nothing remembered) costs nothing.
#[derive(Debug, Default)]
pub struct TieMemo {
    slots: usize,
    inner: OnceLock<Slots>,
    /// Per (domain, depth below it): the last free count asked, at a generation of the
    /// domain, and rule 3's winner among its domains of that depth with that many free GPUs.
    domains: Mutex<HashMap<(DomainId, usize), DomainAnswer>>,
}

/// A remembered winner among equally free domains of one depth (see [`TieMemo::domain`]).
#[derive(Debug, Clone, Copy)]
struct DomainAnswer {
    generation: u32,
    free: u64,
    winner: Option<DomainId>,
}

#[derive(Debug)]
struct Slots {
    generations: Vec<u32>,
    answers: Vec<OnceLock<Box<[AtomicU64; COUNTS]>>>,
}

impl TieMemo {
    /// A memo for `slots` domain slots, with nothing remembered.
    pub fn new(slots: usize) -> Self {
        Self {
            slots,
            inner: OnceLock::new(),
            domains: Mutex::new(HashMap::new()),
        }
    }

    fn slots(&self) -> &Slots {
        self.inner.get_or_init(|| Slots {
            // Generations start at 1 so that a slot never written (0) is never current.
            generations: vec![1; self.slots],
            answers: (0..self.slots).map(|_| OnceLock::new()).collect(),
        })
    }

    /// The remembered winner among `domain`'s domains of `depth` with exactly `free` free
    /// GPUs (`Some(None)`: no such domain), if current. Looked up by key only: never iterated.
    pub fn domain(&self, domain: DomainId, depth: usize, free: u64) -> Option<Option<DomainId>> {
        let generation = *self.inner.get()?.generations.get(domain as usize)?;
        let answers = self.domains.lock().ok()?;
        let answer = answers.get(&(domain, depth))?;
        (answer.generation == generation && answer.free == free).then_some(answer.winner)
    }

    /// Remembers the winner among `domain`'s domains of `depth` with `free` free GPUs.
    pub fn set_domain(&self, domain: DomainId, depth: usize, free: u64, winner: Option<DomainId>) {
        let Some(&generation) = self.slots().generations.get(domain as usize) else {
            return;
        };
        if let Ok(mut answers) = self.domains.lock() {
            let answer = DomainAnswer {
                generation,
                free,
                winner,
            };
            answers.insert((domain, depth), answer);
        }
    }

    /// Forgets every answer of `domain` (it or a node below it changed).
    pub fn touch(&mut self, domain: DomainId) {
        let Some(inner) = self.inner.get_mut() else {
            return; // nothing remembered yet
        };
        let Some(generation) = inner.generations.get_mut(domain as usize) else {
            return;
        };
        *generation = generation.wrapping_add(1);
        if *generation == 0 {
            // Wrapped around: an old answer could look current, so drop them all.
            *generation = 1;
            if let Some(answers) = inner.answers.get_mut(domain as usize) {
                *answers = OnceLock::new();
            }
            if let Ok(domains) = self.domains.get_mut() {
                domains.retain(|&(id, _), _| id != domain);
            }
        }
    }

    /// The remembered answer for `domain` and `free` (`Some(None)`: no such node), if current.
    pub fn get(&self, domain: DomainId, free: u32) -> Option<Option<NodeId>> {
        let inner = self.inner.get()?;
        let generation = *inner.generations.get(domain as usize)?;
        let slot = inner
            .answers
            .get(domain as usize)?
            .get()?
            .get(free as usize)?;
        let packed = slot.load(Ordering::Relaxed);
        if packed >> 32 != u64::from(generation) {
            return None;
        }
        let node = u32::try_from(packed & u64::from(u32::MAX)).ok()?;
        Some(node.checked_sub(1))
    }

    /// Remembers the answer for `domain` and `free` at the domain's current generation.
    pub fn set(&self, domain: DomainId, free: u32, node: Option<NodeId>) {
        let inner = self.slots();
        let (Some(&generation), Some(cell)) = (
            inner.generations.get(domain as usize),
            inner.answers.get(domain as usize),
        ) else {
            return;
        };
        let answers = cell.get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))));
        let Some(slot) = answers.get(free as usize) else {
            return;
        };
        // Low half: the node's id plus one, or 0 for "no such node"; high half: the generation.
        let encoded = node.map_or(0, |node| node.saturating_add(1));
        slot.store(
            (u64::from(generation) << 32) | u64::from(encoded),
            Ordering::Relaxed,
        );
    }
}

impl TieMemo {
    /// Every current answer: `(domain, free count, node)` (invariant checks).
    pub fn current(&self) -> Vec<(DomainId, u32, Option<NodeId>)> {
        let mut found = Vec::new();
        let Some(inner) = self.inner.get() else {
            return found;
        };
        for (domain, cell) in inner.answers.iter().enumerate() {
            let (Ok(domain), Some(answers)) = (DomainId::try_from(domain), cell.get()) else {
                continue;
            };
            for free in (0u32..).take(answers.len()) {
                if let Some(node) = self.get(domain, free) {
                    found.push((domain, free, node));
                }
            }
        }
        found
    }
}

impl TieMemo {
    /// Every current domain answer: `(domain, depth, free count, winner)`, sorted (invariant
    /// checks).
    pub fn current_domains(&self) -> Vec<(DomainId, usize, u64, Option<DomainId>)> {
        let keys: Vec<(DomainId, usize, u64)> = match self.domains.lock() {
            Ok(answers) => answers
                .iter()
                .map(|(&(domain, depth), answer)| (domain, depth, answer.free))
                .collect(),
            Err(_) => return Vec::new(),
        };
        let mut found: Vec<_> = keys
            .into_iter()
            .filter_map(|(domain, depth, free)| {
                let winner = self.domain(domain, depth, free)?;
                Some((domain, depth, free, winner))
            })
            .collect();
        found.sort_unstable();
        found
    }
}

impl Clone for TieMemo {
    /// A memo of the same size with nothing remembered.
    fn clone(&self) -> Self {
        Self::new(self.slots)
    }
}

impl PartialEq for TieMemo {
    /// Always equal: the memo is derived from the state, which is compared.
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for TieMemo {}
