//! Test machinery, compiled only with the `testing` feature (the test command and the fuzz
//! targets enable it; a default build has none of it): the operation [`script`]s of the
//! property tests and fuzzing, the snapshot framing the restore fuzzer uses, and the failpoint
//! ([`crate::Engine::set_failpoint`]).

pub mod script;

pub use crate::snapshot::frame as frame_snapshot;
