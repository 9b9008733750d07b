//! Request deadlines on tokio: [`deadline_core`] makes every decision, this crate gives it
//! tokio's time, a place for the current deadline, and the glue to tower, hyper, tonic,
//! reqwest, tokio-postgres and sqlx.
//!
//! One way per job:
//!
//! | job | the way |
//! |---|---|
//! | a server reads the caller's deadline and answers in time | [`DeadlineLayer`] (feature `tower`) |
//! | a downstream call in a handler | a [`Dependency`] static and its one-line `run`; [`reqwest::classify`] (feature `reqwest`) or [`tonic::classify`] (feature `tonic`) reads the client's errors |
//! | a tower client (hyper-util, tonic's `Channel`) | [`DependencyLayer`] (feature `tower`; `tonic` for a `Channel`, whose body is buffered) |
//! | bound a piece of work by a deadline | [`scope`] / [`scope_timeout`] |
//! | a database query | [`postgres::Session`] (feature `postgres`), [`sqlx`] (feature `sqlx`) |
//!
//! ```
//! use deadline_core::{CallError, Policy, ms};
//! use deadline_tokio::{Dependency, scope_timeout};
//!
//! // One static per dependency: its policy, retry budget, breaker, counters and latency.
//! static PRICING: Dependency = Dependency::new(
//!     Policy::required("pricing").idempotent().with_cap(ms(110)).with_floor(ms(30)).with_retries(1),
//! );
//!
//! async fn price() -> Result<u32, std::io::Error> {
//!     tokio::time::sleep(ms(105)).await; // the dependency's latency
//!     Ok(42)
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The request arrives with 200 ms; our own work after the call takes 20 ms.
//! let answer = scope_timeout(ms(200), async {
//!     PRICING.run(|_| price()).reserve(ms(20)).await // min(200 - 20, 110) = 110 ms
//! })
//! .await??;
//! assert_eq!(answer, 42);
//! # Ok(())
//! # }
//! ```
//!
//! The current deadline belongs to the future a scope wraps, as a task-local's value does:
//! [`current`] and [`remaining`] read it anywhere below, a task started with `tokio::spawn`
//! sees it only through [`propagate`], and nested scopes can only shorten it. [`Tokio`] is
//! the runtime the core's types run on here; [`time`] holds its clock and timer, and
//! [`low_level`] the pieces beneath `Dependency::run` for code that keeps no static.
//!
//! # Feature flags
#![doc = document_features::document_features!()]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without features `tower`, `postgres` and `sqlx` some links in these docs point at items that
// are not built: they render as plain text. docs.rs builds every feature, as the test
// command's rustdoc check does, where every link must resolve.
#![cfg_attr(
    not(all(feature = "tower", feature = "postgres", feature = "sqlx")),
    allow(rustdoc::broken_intra_doc_links)
)]

mod bounded;
mod call;
mod clock;
#[cfg(feature = "hyper-util")]
pub mod connect;
mod context;
#[cfg(any(feature = "postgres", feature = "sqlx"))]
pub mod database;
#[cfg(any(feature = "hyper-util", feature = "tonic"))]
mod error_chain;
#[cfg(feature = "tower")]
pub mod layer;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "sqlx")]
pub mod sqlx;
mod statement;
#[cfg(feature = "tonic")]
pub mod tonic;

pub use context::{Scope, Scoped, Tokio, current, propagate, remaining, scope, scope_timeout};

/// tokio's clock and timer as the core's, and the conversions between tokio's instants and
/// the core's (on one time line with deadline-std's, so a deadline crosses to a blocking
/// helper with the same time left).
pub mod time {
    pub use crate::clock::{TokioClock, TokioTimer, checked_to_tokio, from_tokio, to_tokio};
}

/// The pieces beneath [`Dependency::run`](deadline_core::Dependency::run), for code that keeps
/// no `Dependency` static: one call's decision from the current deadline ([`decide`](low_level::decide)), a call
/// run under it ([`within`](crate::low_level::within)), the core's driver on tokio ([`call`](crate::low_level::call), [`drive`](crate::low_level::drive)), and a
/// statement timeout from the current deadline ([`decide_statement`](crate::low_level::decide_statement)). A service wants
/// `Dependency::run` (counters, latency, retry budget, breaker included); these are for
/// tools, tests and code that must do without. And a deadline made current without bounding
/// the work ([`with_deadline`](low_level::with_deadline)), for work that bounds itself: to
/// bound work, [`scope`] is the way.
pub mod low_level {
    pub use crate::call::{call, drive};
    pub use crate::context::{Within, decide, with_deadline, within};
    pub use crate::statement::decide_statement;
}

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
pub use layer::dependency::DependencyLayer;
#[cfg(feature = "tower")]
pub use layer::server::DeadlineLayer;
