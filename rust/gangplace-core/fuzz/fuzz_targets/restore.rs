//! Fuzzes snapshot restore with hostile bytes: raw, and as a body behind a valid header and
//! checksum (so the decoder and the state validation are reached, not only the checksum).
//! Restore must never panic; whatever it accepts must pass `check_invariants` and
//! round-trip to the same bytes.
#![no_main]

use gangplace_core::Engine;
use gangplace_core::testing::frame_snapshot;
use libfuzzer_sys::fuzz_target;

fn check(bytes: &[u8]) {
    if let Ok(mut engine) = Engine::restore(bytes, 0.0) {
        engine.check_invariants().expect("a restored engine is consistent");
        let again = engine.snapshot(0.0).expect("a restored engine snapshots");
        let mut copy = Engine::restore(&again, 0.0).expect("its own snapshot restores");
        assert_eq!(copy.snapshot(0.0).expect("snapshot"), again, "round trip");
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    check(&frame_snapshot(data));
});
