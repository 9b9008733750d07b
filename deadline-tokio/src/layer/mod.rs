//! Tower layers that carry the deadline across HTTP hops (feature `tower`).
//!
//! - [`DeadlineLayer`](crate::DeadlineLayer), on a server: each request's deadline comes from its deadline headers
//!   (the earliest of `grpc-timeout`, `connect-timeout-ms`, `x-deadline-ms` and Envoy's
//!   `x-envoy-expected-rq-timeout-ms`), clamped to the server's maximum, and the handler runs
//!   in a [`scope`](crate::scope) with it. A request with no time to be served is answered at
//!   once, without calling the handler; a handler still running at the deadline is dropped,
//!   and the answer is 504 (`DEADLINE_EXCEEDED` for gRPC).
//! - [`PropagateLayer`], on a client: each request made inside a scope carries the time left,
//!   minus the per-hop allowance, in a header; a request with nothing left to send is not
//!   made, the call and its response body are bounded by what was sent, and a downstream
//!   failure that is the deadline's is reported as the deadline's.
//! - [`DependencyLayer`](crate::DependencyLayer), on a client: each request is one call to a
//!   [`Dependency`](crate::Dependency), with the retries, hedges, retry budget and circuit
//!   breaker of its policy; each attempt sends a copy of the request through
//!   [`PropagateService`], with the attempt's own time left in its header. Requests with a
//!   body that is not `Clone` (tonic's) are read into memory once and sent again
//!   ([`DependencyLayer::buffered`](crate::DependencyLayer::buffered), [`ReplayBody`]).
//!
//! Every protocol rule is the core's, in [`deadline_core::wire`]: which header wins
//! ([`Incoming`](deadline_core::wire::Incoming)), what is sent
//! ([`Propagation::send`](deadline_core::wire::Propagation::send)), which failure is the
//! deadline's ([`Sent::is_deadline_failure`](deadline_core::wire::Sent::is_deadline_failure)),
//! which response is retried ([`ResponseHead::classify`](deadline_core::wire::ResponseHead::classify)),
//! and every answer in every protocol ([`Answer`](deadline_core::wire::Answer)). The layers
//! read headers, read the clock, call those and write what they return. Every future and
//! body is bounded the same way, as tokio's own `timeout` bounds a future: the work first,
//! then a timer made only when it is pending.
//!
//! The futures are written by hand, not boxed: a layer allocates nothing per request beyond
//! what `http` itself does (the header value a client writes; the
//! [`Deadline`](deadline_core::Deadline) the server inserts into the request's extensions),
//! and the short text of an answer it makes itself.
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
//! use deadline_core::wire::DeadlineHeader;
//! use deadline_tokio::DeadlineLayer;
//! use deadline_tokio::layer::PropagateLayer;
//! use http::{Request, Response};
//! use http_body_util::BodyExt;
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! // Kept back per hop: 5 ms. The most a caller is believed: 10 s.
//! static HOP: Propagation = Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(10_000));
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

mod answer;
mod bounded_body;
pub(crate) mod dependency;
mod dependency_attempt;
mod dependency_error;
mod dependency_future;
pub(crate) mod headers;
mod propagate;
mod propagate_body;
mod propagate_error;
mod replay;
pub(crate) mod server;
mod server_body;
#[cfg(feature = "tonic")]
mod tonic_status;

pub use dependency::{Buffered, Cloned, DependencyService};
pub use dependency_error::DependencyError;
pub use dependency_future::{BufferedFuture, DependencyFuture};
pub use propagate::{PropagateFuture, PropagateLayer, PropagateService};
pub use propagate_body::PropagateBody;
pub use propagate_error::PropagateError;
pub use replay::ReplayBody;
pub use server::{DeadlineFuture, DeadlineService};
pub use server_body::{BodyError, DeadlineBody};
