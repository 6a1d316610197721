//! Spares (docs/repair.md "Spares", issue 14): extra pods of a gang's pod size held next to it.
//!
//! A request with spares is placed as the request it *folds* into: without slices, a gang of
//! `pods + spares` pods (and `min_pods + spares` at the least); with slices, every innermost
//! slice of `k` pods becomes one of `k + spares`, and every outer layer grows in proportion.
//! The folded placement is then split: the last `spares` ranks (of every innermost slice,
//! with slices) become the spares, the rest are the gang's ranks in order.

use std::borrow::Cow;

use crate::error::{CoreResult, invalid};
use crate::limits::{MAX_GANG_GPUS, MAX_PODS};
use crate::model::{GangRequest, Placement, PodPlacement};
use crate::shapes::SliceLayer;

impl GangRequest {
    /// The same request with `spares` spare pods (per innermost slice with slices): the pods
    /// and spares together must stay within the gang limits.
    pub fn with_spares(self, spares: i64) -> CoreResult<Self> {
        let spares = u64::try_from(spares)
            .ok()
            .filter(|&spares| spares <= MAX_PODS)
            .ok_or_else(|| {
                invalid(format!(
                    "spares must be between 0 and {MAX_PODS}, got {spares}"
                ))
            })?;
        let request = Self { spares, ..self };
        let placed = request.placed_pods(request.pods);
        if placed > MAX_PODS
            || placed.saturating_mul(u64::from(request.gpus_per_pod)) > MAX_GANG_GPUS
        {
            return Err(invalid(format!(
                "{} pods and their spares ({placed} pods x {} GPUs) exceed the limit of \
                 {MAX_GANG_GPUS} GPUs",
                request.pods, request.gpus_per_pod
            )));
        }
        Ok(request)
    }

    /// The innermost slice size, if the request has slices.
    pub(crate) fn innermost_slice(&self) -> Option<u64> {
        self.slices.last().map(|layer| layer.pods_per_slice)
    }

    /// How many pods a gang of `pods` ranks takes with its spares.
    pub fn placed_pods(&self, pods: u64) -> u64 {
        match self.innermost_slice() {
            None => pods.saturating_add(self.spares),
            Some(inner) => (pods / inner).saturating_mul(inner.saturating_add(self.spares)),
        }
    }

    /// The request the search places: `self` without spares, or the one it folds into.
    pub fn placed(&self) -> Cow<'_, GangRequest> {
        if self.spares == 0 {
            return Cow::Borrowed(self);
        }
        let inner = self.innermost_slice().unwrap_or(1);
        let grown = |size: u64| size / inner * (inner + self.spares);
        let slices = self.slices.iter().map(|layer| SliceLayer {
            level: layer.level.clone(),
            pods_per_slice: grown(layer.pods_per_slice),
        });
        Cow::Owned(GangRequest {
            pods: self.placed_pods(self.pods),
            min_pods: self.min_pods.map(|min| self.placed_pods(min)),
            slices: slices.collect(),
            spares: 0,
            ..self.clone()
        })
    }

    /// Splits the placement of [`GangRequest::placed`] into the gang's ranks and its spares.
    pub fn split_spares(&self, mut placement: Placement) -> Placement {
        placement.gpu_milli = self.gpu_milli; // docs/resources.md "Fractions of a GPU"
        if self.spares == 0 {
            return placement;
        }
        let every = self
            .innermost_slice()
            .map_or(placement.pods.len() as u64, |inner| inner + self.spares);
        let kept = every.saturating_sub(self.spares);
        let (mut ranks, mut spares): (Vec<PodPlacement>, Vec<PodPlacement>) = (vec![], vec![]);
        for (index, pod) in (0u64..).zip(placement.pods) {
            match index % every.max(1) < kept {
                true => ranks.push(pod),
                false => spares.push(pod),
            }
        }
        placement.pods = ranks;
        placement.spares = spares;
        placement
    }
}

impl crate::model::MultiGangRequest {
    /// Whether some group holds spares.
    pub fn has_spares(&self) -> bool {
        self.groups.iter().any(|group| group.spares > 0)
    }

    /// The request the search places: every group folded with its spares (docs/repair.md "Spares").
    pub fn placed(&self) -> Cow<'_, crate::model::MultiGangRequest> {
        if !self.has_spares() {
            return Cow::Borrowed(self);
        }
        let groups = self.groups.iter().map(|group| group.placed().into_owned());
        Cow::Owned(crate::model::MultiGangRequest {
            groups: groups.collect(),
            ..self.clone()
        })
    }

    /// Splits the placement of [`MultiGangRequest::placed`]: in every group, its last
    /// `spares` pods (per innermost slice with slices) become spares, listed group by group
    /// in request order; the groups' counts are their ranks.
    pub fn split_spares(&self, mut placement: Placement) -> Placement {
        if !self.has_spares() {
            return placement;
        }
        let mut folded = std::mem::take(&mut placement.pods).into_iter();
        for (group, (_, count)) in self.groups.iter().zip(placement.groups.iter_mut()) {
            let pods: Vec<PodPlacement> = folded
                .by_ref()
                .take(usize::try_from(*count).unwrap_or(usize::MAX))
                .collect();
            let part = Placement {
                gpu_milli: None,
                pods,
                level: String::new(),
                domain: Vec::new(),
                slices: Vec::new(),
                groups: Vec::new(),
                spares: Vec::new(),
            };
            let part = group.split_spares(part);
            *count = part.pods.len() as u64;
            placement.pods.extend(part.pods);
            placement.spares.extend(part.spares);
        }
        placement
    }
}
