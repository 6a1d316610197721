//! Batches of any requests (`place_many`, `reserve_many`): every request validated first,
//! then each handed to the one-gang operations ([`crate::engine`]) or the multi-role ones
//! ([`crate::roles`]).

use crate::engine::Engine;
use crate::engine::transactions::{Owner, check_owner, check_ttl};
use crate::error::{CoreError, CoreResult};
use crate::model::{AnyRequest, Placement, Reservation};

impl Engine {
    /// Checks a request against the cluster (levels) without placing it.
    fn validate(&self, request: &AnyRequest) -> CoreResult<()> {
        match request {
            AnyRequest::Gang(request) => self.demand(request).map(|_| ()),
            AnyRequest::Roles(request) => self.resolve_roles(request).map(|_| ()),
        }
    }

    /// Where each gang would go on the current state, independently of the others.
    /// Every request is validated first: an invalid one fails the whole batch.
    pub fn place_many(
        &mut self,
        requests: &[AnyRequest],
        now: f64,
    ) -> CoreResult<Vec<Option<Placement>>> {
        self.reclaim(now);
        for request in requests {
            self.validate(request)?;
        }
        requests
            .iter()
            .map(|request| match request {
                AnyRequest::Gang(request) => self.place(request, now),
                AnyRequest::Roles(request) => self.place_roles(request, now),
            })
            .collect()
    }

    /// Reserves the gangs greedily in order, each seeing the holds of the previous ones.
    /// A gang that does not fit, or would take `owner` past its cap, gets `None`. Every
    /// request is validated first: an invalid one fails the batch before anything is held.
    pub fn reserve_many(
        &mut self,
        requests: &[AnyRequest],
        ttl: f64,
        owner: Owner<'_>,
        now: f64,
    ) -> CoreResult<Vec<Option<Reservation>>> {
        check_ttl(ttl)?;
        check_owner(owner)?;
        self.reclaim(now);
        for request in requests {
            self.validate(request)?;
        }
        let mut reservations = Vec::with_capacity(requests.len());
        for request in requests {
            let reserved = match request {
                AnyRequest::Gang(request) => self.reserve(request, ttl, owner, now),
                AnyRequest::Roles(request) => self.reserve_roles(request, ttl, owner, now),
            };
            match reserved {
                Ok(reservation) => reservations.push(Some(reservation)),
                Err(CoreError::Unschedulable(_) | CoreError::LimitExceeded(_)) => {
                    reservations.push(None);
                }
                Err(error) => return Err(error),
            }
        }
        Ok(reservations)
    }
}
