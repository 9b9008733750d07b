//! Tower layers that carry the deadline across HTTP hops (feature `tower`).
//!
//! - [`DeadlineLayer`], on a server: each request's deadline comes from its `grpc-timeout`
//!   (preferred) or `x-deadline-ms` header, clamped to the server's maximum, and the handler
//!   runs in a [`scope`](crate::scope) with it. Handlers read [`remaining`](crate::remaining)
//!   and [`current`](crate::current), and [`decide`](crate::decide), [`drive`](crate::drive)
//!   and [`statement_timeout`](crate::statement_timeout) inside them use it. A request with no
//!   time to be served is answered at once, without calling the handler; a handler still
//!   running at the deadline is dropped, and the answer is 504.
//! - [`PropagateLayer`], on a client: each request made inside a scope carries the time left,
//!   minus the per-hop allowance, in a header; a request with nothing left to send is not
//!   made, the call and its response body are dropped at the deadline, and a downstream
//!   failure that arrives with no time left is reported as the deadline's.
//! - [`DependencyLayer`], on a client: each request is one call to a
//!   [`Dependency`](crate::Dependency), with the retries, hedges, retry budget and circuit
//!   breaker of its policy; each attempt sends a copy of the request through
//!   [`PropagateService`], with the attempt's own time left in its header. Responses are
//!   classified by status ([`classify_response`]: a 503 or gRPC `UNAVAILABLE` is retried, a
//!   429's `Retry-After` and gRPC's `grpc-retry-pushback-ms` are honoured, a 400 is returned
//!   at once), and when the call gives up after an answer, the caller gets that answer.
//!   Requests with a body that is not `Clone` (tonic's) are read into memory once and sent
//!   again ([`DependencyLayer::buffered`], [`ReplayBody`]).
//!
//! `DeadlineLayer` reads `grpc-timeout`, Connect's `connect-timeout-ms` and `x-deadline-ms`;
//! `PropagateLayer` writes the one [`DeadlineHeader`] chosen. Both bound the response body
//! as well as the head: see [`DeadlineBody`] and [`PropagateBody`].
//!
//! All of the arithmetic is the core's ([`deadline_core::wire`], [`deadline_core::Admission`],
//! [`deadline_core::Error::http_status`]): the layers read headers, read the clock and answer.
//!
//! The futures are written by hand, not boxed: a layer allocates nothing per request beyond
//! what `http` itself does (the header value a client writes; the [`Deadline`] the server
//! inserts into the request's extensions), and the short text of an answer it makes itself.
//!
//! # One layer on the server, one on its client
//!
//! A request arrives with 200 ms. The server keeps 5 ms to answer in (its reply margin), so
//! its handler has 195 ms. It works for 50 ms, then calls the next service, which is told
//! 195 - 50 - 5 = 140 ms (5 ms are kept for the network):
//!
//! ```
//! use std::convert::Infallible;
//!
//! use deadline_core::ms;
//! use deadline_core::wire::Propagation;
//! use deadline_tokio::layer::{DeadlineHeader, DeadlineLayer, PropagateLayer};
//! use http::{Request, Response};
//! use http_body_util::BodyExt;
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! // Kept back per hop: 5 ms. The most a caller is believed: 10 s.
//! static HOP: Propagation = Propagation::DEFAULT.allowance(ms(5)).max(ms(10_000));
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // The next service: it answers with the header it was sent.
//! let next = service_fn(|req: Request<()>| async move {
//!     let sent = req.headers().get("grpc-timeout").cloned();
//!     Ok::<_, Infallible>(Response::new(sent))
//! });
//! let client = PropagateLayer::new(HOP, DeadlineHeader::GrpcTimeout).layer(next);
//!
//! // Our server: one layer around the handler. Without a header, a request gets 1 s.
//! let server = DeadlineLayer::new(HOP, ms(1_000)).layer(service_fn(move |_req: Request<()>| {
//!     let client = client.clone();
//!     async move {
//!         tokio::time::sleep(ms(50)).await; // our own work
//!         let sent = client.oneshot(Request::new(())).await.unwrap().into_body();
//!         let sent = sent.into_inner().unwrap().unwrap();
//!         Ok::<_, Infallible>(Response::new(sent.to_str().unwrap().to_owned()))
//!     }
//! }));
//!
//! let request = Request::builder().header("grpc-timeout", "200m").body(()).unwrap();
//! let response = server.oneshot(request).await.unwrap();
//! assert_eq!(response.into_body().collect().await.unwrap().to_bytes(), "140000u");
//! # }
//! ```
//!
//! [`Deadline`]: deadline_core::Deadline

mod answer;
mod classify;
mod client;
mod dependency;
mod replay;
mod server;
#[cfg(feature = "tonic")]
mod status;

pub use answer::{BodyError, DeadlineBody};
pub use classify::classify_response;
#[cfg(feature = "reqwest")]
pub(crate) use client::already_set as client_already_set;
pub use client::{
    DeadlineHeader, PropagateBody, PropagateError, PropagateFuture, PropagateLayer,
    PropagateService, no_time_left,
};
pub use dependency::{
    Buffered, BufferedFuture, Cloned, DependencyError, DependencyFuture, DependencyLayer,
    DependencyService,
};
pub use replay::ReplayBody;
pub use server::{DEFAULT_REPLY_MARGIN, DeadlineFuture, DeadlineLayer, DeadlineService};
