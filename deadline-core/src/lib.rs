//! Request deadlines made real, with no heap and no I/O.
//!
//! One deadline per request; every downstream call's timeout computed when the call starts,
//! from the time left; retries, backoff sleeps and hedged copies spending from that same
//! budget; the time left passed to the next service in a header. This crate holds all of the
//! arithmetic and every decision, over an abstract monotonic clock. The decisions never read
//! a clock and never sleep: each takes `now` and returns data. The optional driver (feature
//! `drive`) is the one part that waits: it sleeps on a [`Timer`] and reads that timer's clock
//! after every wake-up. Adapter crates bind it to tokio, async-std and smol, blocking std and
//! embassy.
//!
//! # The worked example
//!
//! A service has 200 ms and calls A, then B, then C (optional, with a fallback); its own work
//! takes 20 ms. Each call gets `min(left - reserve, cap)`, where the reserve is our own work
//! plus the floors of the required calls still to come:
//!
//! ```
//! use deadline_core::{Deadline, Instant, ms, Policy};
//! use deadline_core::call::Decision;
//! use deadline_core::plan::Plan;
//!
//! let a = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
//! let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
//! let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
//!
//! let deadline = Deadline::after(Instant::ZERO, ms(200));
//! let mut plan: Plan<'_, 4> = Plan::new(deadline, ms(20));
//! let [sa, sb, sc] = [plan.then(&a), plan.then(&b), plan.then(&c)].map(Result::unwrap);
//!
//! // A starts at 0 ms: reserve = 20 + B's floor 30; min(200 - 0 - 50, 50) = 50.
//! assert_eq!(plan.decide(sa, Instant::from_millis(0)).timeout(), Some(ms(50)));
//! // B starts at 10 ms: C is optional, so the reserve is 20; min(200 - 10 - 20, 110) = 110.
//! assert_eq!(plan.decide(sb, Instant::from_millis(10)).timeout(), Some(ms(110)));
//! // C starts at 115 ms: min(200 - 115 - 20, 60) = 60.
//! assert_eq!(plan.decide(sc, Instant::from_millis(115)).timeout(), Some(ms(60)));
//! // In the slow case C starts at 156 ms: 24 ms is under its 25 ms floor, so it is skipped.
//! assert!(matches!(plan.decide(sc, Instant::from_millis(156)), Decision::Skip(_)));
//! ```
//!
//! # Time
//!
//! The core's time is whole microseconds in a `u64`: an [`Instant`] counts them from its
//! clock's origin, and every decision does its arithmetic there. The conversions every call
//! makes, and its timeout, need no 128-bit builtin and no 64-bit division (which a
//! microcontroller pays for with a builtin call); the breaker, the retry budget's window and
//! the millisecond headers divide 64-bit numbers by constants, which on a Cortex-M calls
//! that builtin. [`Duration`]s are read at
//! the edges: a policy's cap and connect limit are kept rounded down to a whole microsecond,
//! its floor and a call's reserve rounded up, so that every guarantee holds for the durations
//! as given; a decision's [`Limits`](crate::call::Limits) give their timeout and connect limit back as
//! [`Duration`]s ([`Limits::timeout`](crate::call::Limits::timeout), [`Limits::connect`](crate::call::Limits::connect)), or in microseconds.
//!
//! [`Duration`]: core::time::Duration
//!
//! # On a microcontroller
//!
//! The crate is `no_std` and, without the features `metrics`, `tonic` and `test-util` (which
//! need an allocator), allocates nothing; it builds for every Cortex-M target. Its
//! shared state (a [`Dependency`]'s retry budget, breaker, counters and
//! latency histogram) is atomics of 32 bits or less, from `portable-atomic`: no 64-bit atomic,
//! so no lock table, on a target without them. A `Dependency` there keeps the compact latency
//! histogram ([`observe::DependencyHistogram`]), under 500 bytes of static RAM each (feature
//! `advice` adds a second, of its timed-out attempts), and its initial value is all zeros but
//! for its policy. What the final binary adds:
//!
//! | target | processors | the binary adds |
//! |---|---|---|
//! | `thumbv7m-none-eabi`, `thumbv7em-none-eabi`, `thumbv7em-none-eabihf` | Cortex-M3, M4, M7 | nothing: 32-bit compare-and-swap is the processor's |
//! | `thumbv6m-none-eabi` | Cortex-M0, M0+ | how `portable-atomic` makes compare-and-swap: one of its two backends |
//!
//! On `thumbv6m-none-eabi`, a single-core chip running in privileged mode (the usual case)
//! masks interrupts around each atomic operation:
//!
//! ```toml
//! [dependencies]
//! portable-atomic = { version = "1", default-features = false, features = ["unsafe-assume-single-core"] }
//! ```
//!
//! or the binary runs them in critical sections, from a `critical-section` implementation it
//! provides (here `cortex-m`'s, for a single core):
//!
//! ```toml
//! [dependencies]
//! portable-atomic = { version = "1", default-features = false, features = ["critical-section"] }
//! cortex-m = { version = "0.7", features = ["critical-section-single-core"] }
//! ```
//!
//! A build that chose neither stops with `portable-atomic`'s explanation of the two. (This
//! crate turns on neither itself, as `portable-atomic` asks of libraries.)
//!
//! A dependency made with `Dependency::deadline_only` links none of the code for retries,
//! backoff, hedges, the live hedge delay's quantile, the retry budget or the breaker; a
//! breaker's slow paths are linked only into a program that makes a breaker. The firmware of
//! the repository measures it all on three boards (BENCHMARKS.md, "On a microcontroller").
//!
//! # Feature flags
#![doc = document_features::document_features!()]
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without feature `test-util` (which turns on `std` and `drive`) some links in these docs
// point at items that are not built: they render as plain text. docs.rs builds every feature,
// as the test command's rustdoc check does, where every link must resolve.
#![cfg_attr(not(feature = "test-util"), allow(rustdoc::broken_intra_doc_links))]
#![cfg_attr(
    not(test),
    warn(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic
    )
)]

#[cfg(feature = "tonic")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;
// The loom model checker (`--cfg loom`, for `tests/loom.rs`) needs std.
#[cfg(loom)]
extern crate std;

// The modules, from the bottom layer up; each uses only the layers below it (checked by
// scripts/layers.sh). They are private: the public paths are the root's vocabulary and the
// namespaces after them, one path per item.
//
// 0: time, the deadline, errors, randomness, outcomes, quantiles.
mod deadline;
mod error;
mod grpc_code;
#[cfg(feature = "test-util")]
mod manual_clock;
mod outcome;
mod quantile;
pub mod rng;
mod sync;
mod time;
mod timer;
// 1: configuration as plain data.
mod backoff;
mod dependency_policy;
mod policy_error;
// 2: the call-timeout decision and what is built on it; the shared protections; the
// protocol rules (over the deadline and admission).
mod admit;
pub mod breaker;
mod call_timeout;
pub mod plan;
mod retry_budget;
pub mod statement;
pub mod wire;
// 3: the call context.
mod call_context;
// 4: the retry and hedge decisions.
mod hedge;
mod retry;
// 5 and 6: the call machine and the async driver.
#[cfg(feature = "drive")]
pub mod drive;
// 7: a dependency as one static, and its one-line call.
#[cfg(feature = "drive")]
mod dependency;
// Beside: what is recorded, and what is worked out offline.
#[cfg(feature = "advice")]
pub mod advice;
#[cfg(feature = "analysis")]
pub mod analysis;
mod counters;
mod histogram;
#[cfg(feature = "http")]
mod http_status;
mod latency;
#[cfg(feature = "advice")]
mod snapshot;
#[cfg(feature = "tonic")]
mod tonic_status;
#[cfg(feature = "tracing")]
mod trace;

pub mod guide;

// The vocabulary.
pub use deadline::Deadline;
#[cfg(feature = "drive")]
pub use dependency::{Dependency, Steps};
pub use dependency_policy::Policy;
#[cfg(feature = "drive")]
pub use drive::report::CallError;
pub use error::Error;
pub use outcome::{Outcome, Pushback};
pub use time::{Clock, Instant, ms};
pub use timer::Timer;

/// A dependency's settings beside its [`Policy`]: whether it is required, whether a call
/// may be repeated, its retries, backoff and hedges; and [`PolicyError`](policy::PolicyError),
/// a setting that could never act ([`Policy::check`]).
pub mod policy;

/// One call's decisions, sans-IO: its timeout from the time left (the formula,
/// `min(left - reserve, cap)`, and the floor below which a call is not made), its context,
/// whether and when to retry ([`RetryState`](call::RetryState): the attempt cap, what may be
/// retried, server pushback, the backoff) and when to send a hedge
/// ([`HedgeState`](call::HedgeState): a copy of a slow call sent before its timeout, the
/// first answer wins).
pub mod call;

/// The retry budget: retries and hedges as a share of the calls.
pub mod budget;

/// What a dependency's calls did: counters and a latency histogram.
///
/// A dependency's histogram ([`DependencyHistogram`](observe::DependencyHistogram)) is the
/// default [`Histogram`](observe::Histogram) (736 buckets, 2 944 bytes, at most 3.125% high)
/// where the target has 64-bit atomics, which every server target has; on a microcontroller
/// without them (thumbv6m, thumbv7m, thumbv7em) it is the
/// [`CompactHistogram`](observe::CompactHistogram) (88 buckets of 16-bit counts, 176 bytes,
/// at most 12.5% high plus one unit of 1.024 ms). Both read the same way: quantiles, counts,
/// the non-empty buckets. With feature `advice`, a `DependencySnapshot` holds a dependency's
/// counters and histogram at one moment, to export.
pub mod observe;

/// The one-line call's types: what [`Dependency::run`] returns, and how it is adjusted.
#[cfg(feature = "drive")]
pub mod run;

/// The current deadline of a future on a [`Runtime`](runtime::Runtime), and the scopes that set and bound
/// it.
#[cfg(feature = "drive")]
pub mod runtime;

/// Virtual time (feature `test-util`): a manual clock, a timer on it, and a runtime whose
/// clock moves only when every future it runs is waiting. For tests, simulations and
/// replays, as tokio's `test-util` is.
#[cfg(feature = "test-util")]
pub mod virtual_time;
