//! reqwest requests under the current deadline (feature `reqwest`).
//!
//! [`DeadlineRequest::deadline`] sets a request's deadline header to the time left less the
//! per-hop allowance, the way [`PropagateLayer`](crate::layer::PropagateLayer) does; with
//! nothing left to send, it refuses, and the request is never made. It also sets reqwest's
//! own timeout (which covers the whole exchange, the body included), one allowance *after*
//! the deadline, as a backstop: the library's timer (the scope's, or the attempt's under
//! `Dependency::run`) always fires first, so a request that runs out of time ends as the
//! library's timeout (counted, retried and answered as one), never as reqwest's error.
//!
//! ```
//! use deadline_core::wire::Propagation;
//! use deadline_core::{Error, ms};
//! use deadline_core::wire::DeadlineHeader;
//! use deadline_tokio::reqwest::DeadlineRequest;
//! use deadline_tokio::scope_timeout;
//!
//! static HOP: Propagation = Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(10_000));
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let client = reqwest::Client::new();
//! scope_timeout(ms(200), async {
//!     let request = client
//!         .get("http://127.0.0.1:9/prices")
//!         .deadline(&HOP, DeadlineHeader::DeadlineMs)
//!         .unwrap()
//!         .build()
//!         .unwrap();
//!     assert_eq!(request.headers()["x-deadline-ms"], "195");
//!     // reqwest's own timer, a backstop one allowance after the library's.
//!     assert_eq!(request.timeout(), Some(&ms(205)));
//!
//!     tokio::time::sleep(ms(196)).await;
//!     // 4 ms left, 5 ms kept per hop: not sent.
//!     let spent = client.get("http://127.0.0.1:9/prices").deadline(&HOP, DeadlineHeader::DeadlineMs);
//!     assert_eq!(spent.unwrap_err(), Error::DeadlineExceeded);
//! })
//! .await;
//! # }
//! ```

use deadline_core::wire::{DeadlineHeader, Incoming, Propagation};
use deadline_core::{Clock, Error};
use http::HeaderMap;
use reqwest::RequestBuilder;

use crate::clock::TokioClock;
use crate::context::current;
use crate::layer::headers::{lookup, set};

/// The deadline on a reqwest [`RequestBuilder`]: see the [module](self).
pub trait DeadlineRequest: Sized {
    /// Inside a [`scope`](crate::scope): sets `header` to the time left less `propagation`'s
    /// allowance (or to a shorter timeout the request already carries in `grpc-timeout`,
    /// `connect-timeout-ms` or `x-deadline-ms`), and reqwest's own timeout one allowance
    /// after the deadline, as a backstop the library's timer beats. Outside any scope, the
    /// request is returned unchanged.
    ///
    /// # Errors
    ///
    /// [`Error::DeadlineExceeded`] when nothing is left to send: do not make the call.
    fn deadline(self, propagation: &Propagation, header: DeadlineHeader) -> Result<Self, Error>;

    /// [`deadline`](Self::deadline) with the defaults: 5 ms kept per hop
    /// ([`Propagation::DEFAULT`]) and the time left in `x-deadline-ms`. Inside a
    /// [`Dependency::run`](deadline_core::Dependency::run) attempt, the time left is the
    /// attempt's.
    ///
    /// # Errors
    ///
    /// [`Error::DeadlineExceeded`] when nothing is left to send: do not make the call.
    fn time_left(self) -> Result<Self, Error> {
        self.deadline(&Propagation::DEFAULT, DeadlineHeader::DeadlineMs)
    }
}

impl DeadlineRequest for RequestBuilder {
    fn deadline(self, propagation: &Propagation, header: DeadlineHeader) -> Result<Self, Error> {
        let Some(deadline) = current() else {
            return Ok(self);
        };
        let now = TokioClock.now();
        // A shorter timeout already on the request is kept. (A request whose body cannot be
        // cloned, a stream, is not looked into: its headers are replaced.)
        let already = self
            .try_clone()
            .and_then(|builder| builder.build().ok())
            .and_then(|request| Incoming::read(lookup(request.headers())).shortest_valid());
        let outgoing = propagation
            .send(deadline, now, already, header)
            .map_err(Error::from)?;
        let mut headers = HeaderMap::with_capacity(2);
        for (name, value) in outgoing.headers() {
            set(&mut headers, name, value);
        }
        // `headers` replaces values of the same name, where `header` would append.
        // reqwest's own timer is a backstop, one allowance after the library's: the
        // library's timer decides.
        let backstop = outgoing
            .sent()
            .deadline()
            .remaining(now)
            .saturating_add(propagation.allowance());
        Ok(self.timeout(backstop).headers(headers))
    }
}
