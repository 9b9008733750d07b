//! Request deadlines on std.
//!
//! [`deadline_core`] makes every decision; this crate gives it std's time:
//!
//! - [`StdClock`]: the core's [`Clock`](deadline_core::Clock) on [`std::time::Instant`].
//! - [`Entropy`]: the default random source for jitter, a generator per thread seeded from
//!   the operating system (the core takes its randomness injected; this is what a real
//!   program injects).
//! - [`blocking`]: a blocking driver for one dependency call: the core's retries and backoff,
//!   with thread sleeps (or virtual ones, in tests).
//! - [`net`]: an attempt's connect and read limits handed to `std::net` sockets.
//! - [`AsyncIoTimer`] (feature `async-io`): the core's [`Timer`](deadline_core::Timer) on
//!   `async-io`, which async-std and smol both run on.
//! - [`AsyncIo`] and [`Blocking`]: the core's [`Runtime`](deadline_core::runtime::Runtime) on
//!   async-std and smol, and on plain threads, for a
//!   [`Dependency`](deadline_core::Dependency)'s one-line call; the current deadline lives
//!   in a thread-local set around each poll of a scoped future.
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
