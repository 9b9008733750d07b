//! Request deadlines on tokio.
//!
//! [`deadline_core`] makes every decision; this crate gives it tokio's time and a place to keep
//! the current deadline:
//!
//! - [`Dependency`]: one `static` per dependency (its policy, retry budget, breaker, counters
//!   and live latency histogram), called in one line: `PRICING.run(|limits| ..).await?`,
//!   under the current deadline, each attempt in its own scope; [`Steps`] computes each
//!   call's reserve for a request that calls several in turn. [`Tokio`] is the runtime they
//!   run on.
//! - [`TokioClock`] and [`TokioTimer`]: the core's [`Clock`](deadline_core::Clock) and
//!   [`Timer`](deadline_core::Timer) on [`tokio::time`], so paused test time drives them.
//! - [`scope`], [`current`], [`remaining`]: the request's deadline, carried by its future as a
//!   task-local would be and inherited by every call made inside it; nested scopes can only
//!   shorten it.
//! - [`decide`] and [`within`]: one nested call's timeout from the time left, and the call run
//!   under it with its own, shorter deadline.
//! - [`call`] and [`drive`]: one dependency call run by the core's driver (timeouts,
//!   retries, hedges) under the current deadline, each attempt in its own shorter scope.
//! - [`statement_timeout`]: the database statement timeout from the time left.
//! - [`Entropy`]: the default random source for jitter, a generator per thread seeded from
//!   the operating system (`deadline_std::Entropy`, re-exported).
//! - With feature `tower`: `DeadlineLayer`, which sets each incoming request's deadline from
//!   its `grpc-timeout` or `x-deadline-ms` header (or a default), sheds what cannot be served
//!   in time and answers 504 when the deadline passes; and `PropagateLayer`, which sends the
//!   time left on outgoing requests and does not call when it is spent. Both bound response
//!   bodies (streams) by the deadline too. `DependencyLayer` makes each request a client
//!   sends one call to a [`Dependency`]: its retries, hedges, retry budget and breaker, with
//!   each attempt's time left in its header and responses classified by status.
//! - With feature `hyper-util`: `connect::Connector`, a connector wrapper (hyper-util's
//!   `HttpConnector`, tonic's `Endpoint::connect_with_connector`) that bounds each connect by
//!   the dependency's connect limit or the time left, whichever is shorter, and gives up a
//!   connection whose writes stall for the policy's cap; and `connect::ClassifyConnect`,
//!   which reads a connect that ran out as the attempt's timeout and a refused one as never
//!   sent.
//! - With feature `postgres`: a `postgres::Session` runs each query in a transaction with
//!   `SET LOCAL statement_timeout` from the time left, cancels it on the server (over the
//!   connection's own TLS) the moment its future is dropped, and does not use the connection
//!   again until the cancel has settled.
//! - With feature `sqlx`: `sqlx::fetch_all` and `sqlx::execute`, the same on a sqlx `PgPool`.
//! - With feature `reqwest`: `reqwest::DeadlineRequest`, which sets a request's timeout and
//!   deadline header from the time left and refuses to send a spent budget.
//!
//! ```
//! use deadline_core::{ms, Policy};
//! use deadline_core::call::Decision;
//! use deadline_tokio::{decide, scope_timeout, within};
//!
//! static PRICING: Policy = Policy::required("pricing").with_cap(ms(110)).with_floor(ms(30));
//!
//! async fn price() -> u32 {
//!     tokio::time::sleep(ms(105)).await; // the dependency's latency
//!     42
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // The request arrives with 200 ms; our own work after the call takes 20 ms.
//! let answer = scope_timeout(ms(200), async {
//!     match decide(&PRICING, ms(20)) {
//!         Decision::Call(limits) => within(limits, price()).await,
//!         Decision::Skip(s) | Decision::Fail(s) => Err(s.error()),
//!     }
//! })
//! .await;
//! assert_eq!(answer, Ok(Ok(42)));
//! # }
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod bounded;
mod call;
mod clock;
#[cfg(feature = "hyper-util")]
pub mod connect;
mod context;
#[cfg(feature = "tower")]
pub mod layer;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "sqlx")]
pub mod sqlx;
mod statement;

pub use call::{call, drive};
pub use clock::{TokioClock, TokioTimer, checked_to_tokio, from_tokio, to_tokio};
pub use context::{
    Scope, Scoped, Tokio, Within, current, current_or_never, decide, is_expired, propagate,
    remaining, scope, scope_timeout, with_deadline, within,
};

/// A dependency called on tokio: the core's [`Dependency`](deadline_core::Dependency) with
/// [`Tokio`] as its runtime, named by a `&'static str`. One `static` per dependency; one line
/// per call. (A dependency whose name is borrowed from configuration is a
/// `deadline_core::Dependency<'n, Tokio>`.) `Dependency<DeadlineOnly>` is one made with
/// [`Dependency::deadline_only`](deadline_core::Dependency::deadline_only): one attempt per
/// call, no retry or hedge code.
pub type Dependency<M = deadline_core::drive::Full> = deadline_core::Dependency<'static, Tokio, M>;

/// A request's calls in order on tokio (the core's [`Steps`](deadline_core::Steps)), so that
/// each call's reserve is computed for it: a `static` beside the dependencies (of one mode:
/// `Steps<N, DeadlineOnly>` for deadline-only ones).
pub type Steps<const N: usize, M = deadline_core::drive::Full> =
    deadline_core::Steps<'static, 'static, Tokio, N, M>;
pub use deadline_std::Entropy;
#[cfg(feature = "tower")]
pub use layer::{DeadlineLayer, PropagateLayer};
pub use statement::statement_timeout;

/// The workspace README's Rust examples (the core's and this crate's), run as doctests.
/// They need the `tonic` and `reqwest` features, which CI turns on (`--all-features`).
#[cfg(all(doctest, feature = "tonic", feature = "reqwest"))]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
