//! `Cluster.place_after` and the pods of `avoid` (docs/preemption.md "Looking ahead", L1-L3).

use std::sync::Arc;

use gangplace_core::HoldId;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::cluster::Cluster;
use crate::cluster_args::hold_id;
use crate::convert;
use crate::types::{GangRequest, Placement, PodPlacement};

/// `request`'s core value when it is a `GangRequest`, else a `TypeError` naming what it is.
pub fn gang_request(request: &Bound<'_, PyAny>) -> PyResult<Arc<gangplace_core::GangRequest>> {
    let gang = request.cast::<GangRequest>().map_err(|_| {
        PyTypeError::new_err(format!(
            "request must be a GangRequest, not {}",
            convert::type_name(request)
        ))
    })?;
    Ok(gang.get().inner.clone())
}

/// The pods of `avoid` (an iterable of `PodPlacement` or `Placement`, a placement standing
/// for all of its pods; `None`: none). docs/preemption.md L3.
pub fn avoided_pods(
    avoid: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<gangplace_core::PodPlacement>> {
    let Some(avoid) = avoid.filter(|avoid| !avoid.is_none()) else {
        return Ok(Vec::new());
    };
    let wrong = |value: &Bound<'_, PyAny>| {
        PyTypeError::new_err(format!(
            "avoid must be an iterable of PodPlacement or Placement, not {}",
            convert::type_name(value)
        ))
    };
    if avoid.is_instance_of::<PyString>() {
        return Err(wrong(avoid));
    }
    let mut pods = Vec::new();
    for item in avoid.try_iter().map_err(|_| wrong(avoid))? {
        let item = item?;
        if let Ok(placement) = item.cast::<Placement>() {
            pods.extend(placement.get().inner.pods.iter().cloned());
            continue;
        }
        let pod = item.cast::<PodPlacement>().map_err(|_| {
            PyTypeError::new_err(format!(
                "each item of avoid must be a PodPlacement or a Placement, not {}",
                convert::type_name(&item)
            ))
        })?;
        pods.push(pod.get().inner.clone());
    }
    Ok(pods)
}

/// The groups of `releases` (an iterable of iterables of allocations or ids).
fn release_groups(releases: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Vec<HoldId>>> {
    let Some(releases) = releases.filter(|releases| !releases.is_none()) else {
        return Ok(Vec::new());
    };
    let wrong = |value: &Bound<'_, PyAny>| {
        PyTypeError::new_err(format!(
            "releases must be an iterable of groups (iterables of allocations or ids), not {}",
            convert::type_name(value)
        ))
    };
    if releases.is_instance_of::<PyString>() {
        return Err(wrong(releases));
    }
    let mut groups = Vec::new();
    for group in releases.try_iter().map_err(|_| wrong(releases))? {
        let group = group?;
        if group.is_instance_of::<PyString>() {
            return Err(wrong(&group));
        }
        let items = group.try_iter().map_err(|_| wrong(&group))?;
        let ids = items
            .map(|item| hold_id(&item?, "each allocation of releases"))
            .collect::<PyResult<Vec<HoldId>>>()?;
        groups.push(ids);
    }
    Ok(groups)
}

#[pymethods]
impl Cluster {
    /// Where a gang would go once some allocations have ended: the first moment it fits.
    ///
    /// A pure query (docs/preemption.md "Looking ahead", L1-L3). ``releases`` lists groups of
    /// allocations (or ids) in the order they are expected to end; the answer is the
    /// smallest ``k`` such that the gang fits once the allocations of ``releases[:k]`` have
    /// ended (their healthy GPUs free, and the resources besides GPUs and the shares of GPUs
    /// their pods use), with the GPUs of ``avoid`` kept out of its way (a shared one takes
    /// no share either), and its placement then, by the placement rules (rules F1-F2 for a
    /// fractional gang, docs/resources.md "Fractions of a GPU"). ``k = 0``: it fits now. Ids
    /// of no live allocation are ignored.
    ///
    /// Returns:
    ///     ``(k, placement)``, or ``None`` when it does not fit even with every group ended.
    ///
    /// Raises:
    ///     InvalidRequest: An unknown level, or a GPU of ``avoid`` its node does not have.
    ///     UnknownNode: A node of ``avoid`` that does not exist.
    ///     UnknownReservation: A string in ``releases`` that is no hold id.
    ///     TypeError: ``request`` is not a ``GangRequest``; malformed ``releases``/``avoid``.
    #[pyo3(
        signature = (request, releases = None, *, avoid = None),
        text_signature = "(self, request, releases=(), *, avoid=())"
    )]
    fn place_after(
        &self,
        py: Python<'_>,
        request: &Bound<'_, PyAny>,
        releases: Option<&Bound<'_, PyAny>>,
        avoid: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<(usize, Placement)>> {
        let request = gang_request(request)?;
        let groups = release_groups(releases)?;
        let avoid = avoided_pods(avoid)?;
        let now = self.now(py)?;
        let found = self.run_detached(py, |engine| {
            Ok(engine.place_after(&request, &groups, &avoid, now)?)
        })?;
        Ok(found.map(|(k, placement)| {
            (
                k,
                Placement {
                    inner: Arc::new(placement),
                },
            )
        }))
    }
}
