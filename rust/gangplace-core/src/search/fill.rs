//! Rule 4's fill (docs/placement.md): the children a spread uses and each one's share.
//!
//! A child that holds all remaining units takes them (the tightest such, then path order);
//! otherwise the largest (then path order) is filled and the rest continues. The children
//! chosen are then placed in path order, so that the pods come out in rule 6's order and the
//! final ranking sort finds them sorted.
//!
//! How the choice is found, by the shape of the capacities:
//!
//! - already in rule 4's order (equal capacities, as on uniform clusters): a prefix of the
//!   children, found by binary search, nothing sorted;
//! - more than [`SORTED_CHILDREN`] children with capacities of at most [`COUNTED_CAPACITY`]
//!   units: children counted per capacity, the fills replayed on those counts, then one pass
//!   in path order picks them: no sort, linear in the children and the largest capacity.
//!   Fills of one capacity take its children in path order, so "the first `k` children of
//!   capacity `c`" names them;
//! - otherwise (few children, or large capacities): sorted into rule 4's order.

use super::Item;
use crate::error::{CoreResult, internal};

/// A child of the domain being spread over: its capacity (in units: pods, or slices of a slice
/// request), its position among its siblings in path order, and the child itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Child {
    /// Units the child holds (at most [`crate::limits::MAX_PODS`], below `u32::MAX`: a
    /// child is 16 bytes, and the passes of rule 4 move fewer bytes).
    pub(super) capacity: u32,
    /// Its position among the siblings considered, in path order.
    pub(super) position: u32,
    /// The child.
    pub(super) item: Item,
}

impl Child {
    /// `(capacity, child)` pairs in path order, numbered.
    pub(super) fn in_path_order(children: impl Iterator<Item = (u64, Item)>) -> Vec<Child> {
        (0u32..)
            .zip(children)
            .map(|(position, (capacity, item))| Child {
                capacity: u32::try_from(capacity).unwrap_or(u32::MAX),
                position,
                item,
            })
            .collect()
    }

    /// Its capacity as a count of units.
    pub(super) fn units(&self) -> u64 {
        u64::from(self.capacity)
    }
}

/// Capacities up to this are counted per value (see the module's documentation).
const COUNTED_CAPACITY: u32 = 4096;

/// Up to this many children are sorted rather than counted: a short sort costs less than
/// the counts' setup and passes (nodes of a rack, racks of a spine).
const SORTED_CHILDREN: usize = 32;

/// Counts of capacities up to this live on the stack; larger ones in one allocation.
const STACK_COUNTS: usize = 65;

/// Rule 4 over `children` (in path order) for `units` units; `place` puts units into one
/// child, called in path order.
pub(super) fn fill_children(
    mut children: Vec<Child>,
    units: u64,
    mut place: impl FnMut(Item, u64) -> CoreResult<()>,
) -> CoreResult<()> {
    children.retain(|child| child.capacity > 0);
    if units == 0 {
        return Ok(());
    }
    // Children in path order and in rule 4's order at once: the chosen prefix (and the child
    // taking the rest, from further on) is in path order as it stands.
    let in_order = children.is_sorted_by(|a, b| a.capacity >= b.capacity);
    if !in_order {
        let largest = children.iter().map(|child| child.capacity).max();
        let counted = largest
            .filter(|&largest| children.len() > SORTED_CHILDREN && largest <= COUNTED_CAPACITY);
        if let Some(largest) = counted {
            return fill_counted(&children, largest, units, place);
        }
        children.sort_unstable_by_key(|child| (std::cmp::Reverse(child.capacity), child.position));
    }
    let chosen = choose_sorted(&mut children, units)?;
    let chosen = &mut children[..chosen];
    if !in_order {
        chosen.sort_unstable_by_key(|child| child.position);
    }
    for child in chosen {
        place(child.item, child.units())?;
    }
    Ok(())
}

/// Rule 4's choices for `units` units among `children` in rule 4's order (capacity
/// descending, then path): the children chosen are moved to the front, up to the returned
/// count, each one's capacity set to its share (its capacity, or the rest for the last).
fn choose_sorted(children: &mut [Child], units: u64) -> CoreResult<usize> {
    let mut remaining = units;
    let mut chosen = 0;
    while remaining > 0 {
        let unused = &children[chosen..];
        let holding_all = unused.partition_point(|child| child.units() >= remaining);
        if holding_all > 0 {
            // The smallest capacity holding the rest, and its first child in path order.
            let smallest = unused[holding_all - 1].capacity;
            let first = unused.partition_point(|child| child.capacity > smallest);
            children.swap(chosen, chosen + first);
            children[chosen].capacity = share(remaining)?;
            return Ok(chosen + 1);
        }
        let Some(child) = unused.first() else {
            return Err(internal("a domain held fewer units than counted"));
        };
        remaining -= child.units();
        chosen += 1;
    }
    Ok(chosen)
}

/// Rule 4 over `children` in path order whose capacities are at most `largest`, by counting
/// (see the module's documentation): `place` is called in path order.
fn fill_counted(
    children: &[Child],
    largest: u32,
    units: u64,
    mut place: impl FnMut(Item, u64) -> CoreResult<()>,
) -> CoreResult<()> {
    let slots = largest as usize + 1;
    let mut on_stack = [0u32; 2 * STACK_COUNTS];
    let mut on_heap = Vec::new();
    let counts = if slots <= STACK_COUNTS {
        &mut on_stack[..2 * slots]
    } else {
        on_heap.resize(2 * slots, 0);
        &mut on_heap[..]
    };
    let (children_of, filled) = counts.split_at_mut(slots);
    for child in children {
        children_of[child.capacity as usize] += 1;
    }
    let mut rest = replay_fills(children_of, filled, units)?;
    // Per capacity, its first `filled` children in path order are fills; the next child of
    // the rest's capacity takes the rest.
    for child in children {
        let capacity = child.capacity as usize;
        if filled[capacity] > 0 {
            filled[capacity] -= 1;
            place(child.item, child.units())?;
        } else if let Some((_, share)) = rest.filter(|&(tightest, _)| tightest == capacity) {
            rest = None;
            place(child.item, share)?;
        }
    }
    match rest {
        None => Ok(()),
        Some(_) => Err(internal("rule 4's counted fill lost a child")),
    }
}

/// Replays rule 4's fills on counts of children per capacity (`children_of`): fills take the
/// largest capacity left; `filled[c]` becomes the number of fills of capacity `c`. Returns
/// the capacity of the child taking the rest (the smallest that holds it) and the rest, or
/// `None` when the fills took every unit.
fn replay_fills(
    children_of: &[u32],
    filled: &mut [u32],
    units: u64,
) -> CoreResult<Option<(usize, u64)>> {
    let mut remaining = units;
    let mut top = children_of.len() - 1;
    while remaining > 0 {
        while children_of[top] == filled[top] {
            if top == 0 {
                return Err(internal("a domain held fewer units than counted"));
            }
            top -= 1;
        }
        let capacity = top as u64;
        if capacity >= remaining {
            // `remaining` <= `capacity` = `top`: the range holds `top`, which has a child left.
            let from = usize::try_from(remaining).unwrap_or(top);
            let tightest = (from..=top)
                .find(|&c| children_of[c] > filled[c])
                .unwrap_or(top);
            return Ok(Some((tightest, remaining)));
        }
        filled[top] += 1;
        remaining -= capacity;
    }
    Ok(None)
}

/// The share of the child that takes the rest: fewer units than its capacity, so it fits.
fn share(remaining: u64) -> CoreResult<u32> {
    u32::try_from(remaining).map_err(|_| internal("a share exceeded a child's capacity"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rule 4 as docs/placement.md says it, one step at a time: `(position, share)` in path order.
    fn rule_four(capacities: &[u32], units: u64) -> Option<Vec<(u32, u64)>> {
        let mut unused: Vec<(u32, u64)> = (0u32..)
            .zip(capacities.iter().map(|&c| u64::from(c)))
            .filter(|&(_, c)| c > 0)
            .collect();
        let mut chosen = Vec::new();
        let mut remaining = units;
        while remaining > 0 {
            let holding = unused.iter().filter(|&&(_, c)| c >= remaining);
            let pick = match holding.min_by_key(|&&(p, c)| (c, p)) {
                Some(&(position, _)) => (position, remaining),
                None => {
                    let &(position, capacity) =
                        unused.iter().min_by_key(|&&(p, c)| (u64::MAX - c, p))?;
                    (position, capacity)
                }
            };
            unused.retain(|&(p, _)| p != pick.0);
            remaining -= pick.1;
            chosen.push(pick);
        }
        chosen.sort_unstable();
        Some(chosen)
    }

    fn filled(capacities: &[u32], units: u64) -> Option<Vec<(u32, u64)>> {
        let children = Child::in_path_order(
            capacities
                .iter()
                .zip(0u32..)
                .map(|(&c, i)| (u64::from(c), Item::Node(i))),
        );
        let mut placed = Vec::new();
        let outcome = fill_children(children, units, |item, share| {
            let Item::Node(position) = item else {
                return Err(internal("not a node"));
            };
            placed.push((position, share));
            Ok(())
        });
        outcome.ok().map(|()| placed)
    }

    #[test]
    fn every_path_follows_rule_four() {
        let cases: &[(&[u32], u64)] = &[
            (&[4, 4, 4, 4], 10),         // sorted: a prefix, the last child takes 2
            (&[1, 5, 3, 5, 2], 7),       // counted: 5 (first), then the tightest for 2: 2
            (&[1, 5, 3, 5, 2], 14),      // 5, 5, 3, 1
            (&[9000, 1, 9000, 3], 9003), // sorted after counting refused: 9000, then 3
            (&[0, 2, 0, 7], 3),          // zeros never chosen
            (&[3, 1], 5),                // more than held
        ];
        for &(capacities, units) in cases {
            assert_eq!(
                filled(capacities, units),
                rule_four(capacities, units),
                "{capacities:?} {units}"
            );
        }
        assert_eq!(filled(&[1, 5, 3, 5, 2], 7), Some(vec![(1, 5), (4, 2)]));
        // Counted (more than SORTED_CHILDREN children): capacities 1..=4 repeating.
        let many: Vec<u32> = (0..40).map(|i| i % 4 + 1).collect();
        for units in [1, 7, 30, 99, 100, 101] {
            assert_eq!(filled(&many, units), rule_four(&many, units), "{units}");
        }
    }

    proptest! {
        #[test]
        fn fills_agree_with_rule_four(
            capacities in prop::collection::vec(prop_oneof![0u32..6, 0u32..80, 4000u32..4200], 0..80),
            units in 0u64..400,
        ) {
            prop_assert_eq!(filled(&capacities, units), rule_four(&capacities, units));
        }
    }
}
