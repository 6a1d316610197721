//! Fuzzes the operation decoder: every byte string is a script of engine operations, run
//! with every guarantee checked after every step (see `gangplace_core::testing::script`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = gangplace_core::testing::script::run(data) {
        panic!("guarantee broken: {broken}");
    }
});
