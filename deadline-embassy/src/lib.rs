//! Request deadlines on embassy.
//!
//! [`deadline_core`] makes every decision; this crate gives it embassy's time: [`EmbassyClock`]
//! and [`EmbassyTimer`], the core's [`Clock`](deadline_core::Clock) and
//! [`Timer`](deadline_core::Timer) on [`embassy_time`]. It is
//! `#![no_std]` and allocates nothing. [`Embassy`] is the core's
//! [`Runtime`](deadline_core::runtime::Runtime) on them, for a
//! [`Dependency`](deadline_core::Dependency)'s one-line call: the same application code as
//! on tokio, with the current deadline in a static behind a critical section.
//!
//! It enables no `tick-hz-*`, `generic-queue-*`, `std` or `mock-driver` feature of
//! `embassy-time`: the final binary picks its tick rate, its timer queue and its time driver.
//! Any tick rate works: ticks convert to the core's microseconds exactly (rounded down), and
//! an instant converts back to the first tick at or after it, so a sleep never ends early.
//!
//! # Feature flags
#![doc = document_features::document_features!()]
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod clock;
mod runtime;

pub use clock::{EmbassyClock, EmbassySleep, EmbassyTimer, from_embassy, to_embassy};
pub use runtime::Embassy;
