//! One scenario suite for every adapter of the `deadline` crates.
//!
//! The [`scenarios`] are written once, generic over the core's
//! [`Timer`](deadline_core::Timer), and each adapter's tests run all of them on its runtime in
//! virtual time ([`for_each_scenario!`] lists them): tokio with paused time, embassy with its
//! mock driver, async-std and smol with the core's virtual-time timer driven by [`run_virtual`].
//!
//! - [`scenarios`]: the checkout example's chain and its slow case, a retry within the budget, a hedge that
//!   wins while its loser is cancelled, a backoff past the deadline, the deadline reached in
//!   the middle of a backoff, and an abandoned request whose attempts are all dropped.
//! - [`faults`]: a dependency that hangs forever or errors every time, a clock that steps
//!   back, a timer that fires late or never, a hedge whose loser never finishes
//!   ([`for_each_fault!`] lists them).
//! - [`Attempts`]: drop guards that record when each attempt started, finished and was dropped.
//! - [`Late`], [`Stepper`] and [`run_virtual`]: a late-waking timer, and virtual time on any
//!   executor.
#![forbid(unsafe_code)]

pub mod faults;
mod probe;
pub mod scenarios;
mod timers;

pub use probe::{Attempts, Guard, MAX_ATTEMPTS, Seen};
pub use timers::{Late, Stepped, Stepper, run_virtual};
