//! The balanced spread (docs/shapes.md "Balanced spread"): as many children as pack would use, the
//! largest by capacity (then path), the units split among them by water-filling.
//!
//! Water-filling gives every chosen child `min(capacity, L)` units for the largest `L` whose
//! total does not exceed the units, then one more unit to each child that can take it, in path
//! order, until none are left: the smallest share is as large as the capacities allow, and two
//! shares differ by more than one only where a capacity stops the smaller.

use super::{Child, Item};
use crate::error::{CoreResult, internal};

/// The shares of a balanced split of `units` over `children` (capacities, in path order):
/// `(child, units)` in path order, zero shares left out.
pub(super) fn balanced_shares(children: &[Child], units: u64) -> CoreResult<Vec<(Item, u64)>> {
    let mut by_capacity: Vec<usize> = (0..children.len())
        .filter(|&index| children[index].units() > 0)
        .collect();
    // Largest capacity first; the sort is stable, so equal capacities stay in path order.
    by_capacity.sort_by_key(|&index| std::cmp::Reverse(children[index].units()));
    let mut total = 0;
    let used = by_capacity
        .iter()
        .position(|&index| {
            total += children[index].units();
            total >= units
        })
        .ok_or_else(|| internal("a domain held fewer units than counted"))?;
    let mut chosen: Vec<usize> = by_capacity[..=used].to_vec();
    chosen.sort_unstable();
    let level = water_level(chosen.iter().map(|&index| children[index].units()), units);
    let mut shares: Vec<(Item, u64)> = chosen
        .iter()
        .map(|&index| (children[index].item, children[index].units().min(level)))
        .collect();
    let mut left = units - shares.iter().map(|&(_, share)| share).sum::<u64>();
    for (&index, share) in chosen.iter().zip(shares.iter_mut()) {
        if left > 0 && children[index].units() > share.1 {
            share.1 += 1;
            left -= 1;
        }
    }
    if left > 0 {
        return Err(internal("a balanced split lost units"));
    }
    Ok(shares)
}

/// The largest `L` with `sum(min(capacity, L)) <= units`, by bisection (capacities hold at
/// least `units` in total).
fn water_level(capacities: impl Iterator<Item = u64> + Clone, units: u64) -> u64 {
    let filled = |level: u64| -> u64 { capacities.clone().map(|c| c.min(level)).sum() };
    let (mut low, mut high) = (0, units);
    while low < high {
        let middle = low + (high - low).div_ceil(2);
        if filled(middle) <= units {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    low
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(capacities: &[u64], units: u64) -> Vec<u64> {
        let children = Child::in_path_order(
            (0u32..)
                .zip(capacities)
                .map(|(index, &c)| (c, Item::Node(index))),
        );
        let split = balanced_shares(&children, units).unwrap_or_default();
        split.into_iter().map(|(_, share)| share).collect()
    }

    #[test]
    fn splits_evenly_where_capacities_allow() {
        assert_eq!(shares(&[8, 8, 8], 12), vec![6, 6]); // pack uses two children
        assert_eq!(shares(&[8, 8, 8], 17), vec![6, 6, 5]);
        assert_eq!(shares(&[2, 8, 8], 17), vec![2, 8, 7]);
        assert_eq!(shares(&[3, 9, 4], 10), vec![6, 4]); // the two largest: 9 and 4
        assert_eq!(shares(&[5, 5, 5], 11), vec![4, 4, 3]); // leftovers in path order
    }
}
