//! `Cluster.seed_ids`: repeatable hold ids for simulations and tests.

use pyo3::prelude::*;

use crate::cluster::Cluster;
use crate::convert;

#[pymethods]
impl Cluster {
    /// Hold ids from now on come from a generator seeded with ``seed``.
    ///
    /// For repeatable runs (simulations, tests): preemption and defragmentation break their
    /// last ties by id, so random ids make such runs differ. The ids stay 128-bit and
    /// unique but become predictable: never seed a cluster that serves several tenants.
    /// ``None`` returns to the operating system's randomness. Snapshots do not keep it.
    ///
    /// Raises:
    ///     TypeError: ``seed`` is not an int or ``None``.
    #[pyo3(signature = (seed))]
    fn seed_ids(&self, seed: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let seed = match seed {
            None => None,
            Some(value) => {
                let seed = convert::int(value, "seed")?;
                Some(u64::from_ne_bytes(seed.to_ne_bytes()))
            }
        };
        Ok(self.run(|engine| {
            engine.seed_ids(seed);
            Ok(())
        })?)
    }
}
