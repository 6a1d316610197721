//! A property test over random operation sequences, and a check that the decoder reaches
//! every operation (needs the `testing` feature: `cargo test --features testing`).
#![cfg(feature = "testing")]
#![allow(clippy::unwrap_used)] // test helpers: a failed setup should panic loudly

use gangplace_core::testing::script;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random operation scripts (the same decoder the fuzz targets use): invariants,
    /// conservation, unchanged state on refusal and snapshot round trips, after every step.
    #[test]
    fn guarantees_hold_after_every_operation(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let outcome = script::run(&bytes).map_err(TestCaseError::fail)?;
        prop_assert!(outcome.operations >= 6);
    }
}

#[test]
fn scripts_exercise_every_operation() {
    // A fixed script that walks through each operation kind, so a decoder change that
    // silently drops one shows up here.
    let params = [3, 1, 3, 2, 6, 6, 4, 2, 2, 2, 1, 4, 4];
    let mut bytes: Vec<u8> = Vec::new();
    for (selector, count) in (0u8..).zip(params) {
        bytes.push(selector);
        bytes.extend((1..=count).map(|param| param * 3 + selector));
    }
    bytes.extend([11, 0, 0, 0, 0, 11, 5, 0, 7, 1]); // a snapshot, then a corrupted one
    let kinds: std::collections::BTreeSet<String> = script::decode(&bytes)
        .iter()
        .map(|op| {
            format!("{op:?}")
                .split([' ', '{'])
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(kinds.len(), 13, "{kinds:?}");
    let outcome = script::run(&bytes).unwrap();
    assert_eq!(outcome.operations, 6 + script::decode(&bytes).len());
}
