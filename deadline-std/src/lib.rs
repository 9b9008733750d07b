//! Request deadlines on std.
//!
//! [`deadline_core`] makes every decision; this crate gives it std's time:
//!
//! - [`Blocking`] and [`AsyncIo`]: the core's [`Runtime`](deadline_core::runtime::Runtime) on
//!   plain threads, and on async-std and smol, for a [`Dependency`](deadline_core::Dependency)'s
//!   one-line call (its retries, budget, breaker, counters and latency histogram); the current
//!   deadline lives in a thread-local set around each poll of a scoped future. This is the way
//!   to call a dependency.
//! - [`StdClock`]: the core's [`Clock`](deadline_core::Clock) on [`std::time::Instant`].
//! - [`Entropy`]: the default random source for jitter, a generator per thread seeded from
//!   the operating system (the core takes its randomness injected; this is what a real
//!   program injects).
//! - [`net`]: an attempt's connect and read limits handed to `std::net` sockets.
//! - [`AsyncIoTimer`] (feature `async-io`): the core's [`Timer`](deadline_core::Timer) on
//!   `async-io`, which async-std and smol both run on.
//! - [`blocking`]: for a driver of your own, as the core's
//!   [`Driver`](deadline_core::drive::Driver) is: a blocking loop over one
//!   [`Call`](deadline_core::call::Call), with thread sleeps (or virtual ones, in tests). It
//!   keeps no counters or histogram, and draws on a budget or a breaker only when the call
//!   carries them ([`Dependency::call`](deadline_core::Dependency::call) gives one that does).
//!
//! # Testing on async-std and smol
//!
//! async-io has no virtual time. So the [`AsyncIoTimer`] is tested for its contract alone,
//! without waiting: an instant in the past completes at the first poll; one in the future is
//! pending at the first poll and cancels cleanly when dropped. The library's behaviour over
//! time (the checkout example's chain and its slow case, retries, hedges, backoffs, cancellation) is tested
//! by running the shared scenario suite on the async-std and smol executors with the core's
//! virtual-time timer, [`ManualTimer`](deadline_core::virtual_time::ManualTimer), in place of
//! async-io's.
//!
//! # Feature flags
#![doc = document_features::document_features!()]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without feature `test-util` some links in these docs point at items that are not built: they
// render as plain text. docs.rs builds every feature, as the test command's rustdoc check
// does, where every link must resolve.
#![cfg_attr(not(feature = "test-util"), allow(rustdoc::broken_intra_doc_links))]

#[cfg(feature = "async-io")]
mod async_timer;
mod block_on;
pub mod blocking;
mod clock;
mod entropy;
pub mod net;
mod runtime;

#[cfg(feature = "async-io")]
pub use async_timer::{AsyncIoSleep, AsyncIoTimer};
pub use clock::{StdClock, checked_to_std, from_std, to_std};
pub use entropy::Entropy;
#[cfg(feature = "async-io")]
pub use runtime::AsyncIo;
pub use runtime::{Blocking, OnThreads, ThreadSleep, ThreadTimer};
