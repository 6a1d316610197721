//! A lower bound on the members a removal set needs: the largest GPUs-held counts seen.

/// The largest GPUs-held counts seen (up to [`MostHeld::KEPT`], largest first), for a lower
/// bound on the members a removal set needs.
#[derive(Debug, Default)]
pub(super) struct MostHeld {
    largest: [u64; MostHeld::KEPT],
    kept: usize,
    /// Counts added in all, kept or not: past `kept`, some were dropped.
    seen: usize,
}

impl MostHeld {
    pub(super) const KEPT: usize = 16;

    pub(super) fn add(&mut self, held: u64) {
        self.seen += 1;
        if self.kept == Self::KEPT && held <= self.largest[Self::KEPT - 1] {
            return;
        }
        let mut at = self.kept.min(Self::KEPT - 1);
        while at > 0 && self.largest[at - 1] < held {
            self.largest[at] = self.largest[at - 1];
            at -= 1;
        }
        self.largest[at] = held;
        self.kept = (self.kept + 1).min(Self::KEPT);
    }

    /// The fewest of the counts seen whose sum reaches `lacking` (each count past the kept
    /// ones is at most the smallest kept); `usize::MAX` when all of them fall short, which
    /// is known when none was dropped.
    pub(super) fn fewest_reaching(&self, lacking: u64) -> usize {
        let mut sum = 0u64;
        for (index, &held) in self.largest[..self.kept].iter().enumerate() {
            if sum >= lacking {
                return index;
            }
            sum += held;
        }
        if sum >= lacking {
            return self.kept;
        }
        match self.largest[..self.kept].last() {
            Some(&smallest) if smallest > 0 && self.seen > self.kept => {
                let more = (lacking - sum).div_ceil(smallest);
                self.kept
                    .saturating_add(usize::try_from(more).unwrap_or(usize::MAX))
            }
            _ => usize::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::MostHeld;

    proptest! {
        /// The fewest counts reaching a sum is never above the true fewest (a lower bound),
        /// and is exact while every count is kept.
        #[test]
        fn most_held_bounds_the_fewest_members(
            helds in proptest::collection::vec(1u64..600, 0..40),
            lacking in 0u64..4000,
        ) {
            let mut most = MostHeld::default();
            helds.iter().for_each(|&held| most.add(held));
            let mut sorted = helds.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let mut sum = 0;
            let truth = (0..=sorted.len()).find(|&k| {
                let reached = sum >= lacking;
                if k < sorted.len() { sum += sorted[k]; }
                reached
            });
            let bound = most.fewest_reaching(lacking);
            match truth {
                Some(k) => {
                    prop_assert!(bound <= k, "bound {} above the truth {}", bound, k);
                    if helds.len() <= MostHeld::KEPT { prop_assert_eq!(bound, k); }
                }
                None => prop_assert!(helds.len() > MostHeld::KEPT || bound == usize::MAX),
            }
        }
    }
}
