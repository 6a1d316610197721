//! Hard limits, checked before anything is allocated, and the defaults of the API. docs/errors.md's
//! "Limits" table states them; the extension exports them (`gangplace._gangplace.LIMITS`) and
//! a test ties that table to these values.

/// GPUs a node may have. GPU sets are `u64` bitmasks, so this is also the largest pod.
pub const MAX_GPUS_PER_NODE: u32 = 64;
/// Nodes in one cluster.
pub const MAX_NODES: usize = 1 << 22;
/// Topology levels besides the implicit `node` and `cluster`.
pub const MAX_LEVELS: usize = 16;
/// Longest node, domain, level, label key or label value, in bytes (a DNS subdomain's limit).
pub const MAX_NAME_BYTES: usize = 253;
/// GPUs in one gang (`pods * gpus_per_pod`): the most a cluster at its limits can hold.
pub const MAX_GANG_GPUS: u64 = (MAX_NODES as u64) * (MAX_GPUS_PER_NODE as u64);
/// Pods in one gang (each takes at least one GPU).
pub const MAX_PODS: u64 = MAX_GANG_GPUS;
/// Slice layers of one request (Kueue, KAI and Slurm nest at most three).
pub const MAX_SLICE_LAYERS: usize = 3;
/// Longest reservation lifetime, in seconds (7 days).
pub const MAX_TTL_SECONDS: f64 = 7.0 * 24.0 * 3600.0;
/// Lifetime of a reservation when the caller gives none, in seconds.
pub const DEFAULT_TTL_SECONDS: f64 = 30.0;
/// Lifetime of a repair reservation when `repair` is not given one (docs/repair.md "Repair after
/// failures", R4).
pub const DEFAULT_REPAIR_TTL_SECONDS: f64 = 60.0;
/// Ended reservations remembered (so that a second `rollback`/`release` answers `False`
/// rather than `UnknownReservation`). Older ones are forgotten first.
pub const REMEMBERED_ENDED_HOLDS: usize = 65_536;
/// Largest quantity of one resource on a node or per pod (2^50: a petabyte of memory in
/// bytes, a million cores in millicores; sums of pods' amounts cannot overflow).
pub const MAX_RESOURCE_AMOUNT: u64 = 1 << 50;
/// Resources (besides GPUs) named by one node or one request.
pub const MAX_RESOURCES_PER_NODE: usize = 32;
