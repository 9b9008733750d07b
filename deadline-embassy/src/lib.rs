//! Request deadlines on embassy.
//!
//! [`deadline_core`] makes every decision; this crate gives it embassy's time: [`EmbassyClock`]
//! and [`EmbassyTimer`], the core's [`Clock`](deadline_core::Clock) and
//! [`Timer`](deadline_core::Timer) on [`embassy_time`]. It is
//! `#![no_std]` and allocates nothing. [`Embassy`] is the core's
//! [`Runtime`](deadline_core::runtime::Runtime) on them, for a
//! [`Dependency`](deadline_core::Dependency)'s one-line call: the same application code as
//! on tokio, with the current deadline in a static behind a critical section, and
//! [`Entropy`], its default random source for the backoff's jitter.
//!
//! It enables no `tick-hz-*`, `generic-queue-*`, `std` or `mock-driver` feature of
//! `embassy-time`: the final binary picks its tick rate, its timer queue and its time driver.
//! Any tick rate works: ticks convert to the core's microseconds exactly (rounded down), and
//! an instant converts back to the first tick at or after it, so a sleep never ends early.
//!
//! # What the final binary provides
//!
//! On every target: a time driver and its tick rate (an embassy HAL's, or one of your own), a
//! timer queue, and a `critical-section` implementation (the current deadline lives behind
//! one; embassy needs one too). On a Cortex-M with a single core, `cortex-m`'s:
//!
//! ```toml
//! [dependencies]
//! cortex-m = { version = "0.7", features = ["critical-section-single-core"] }
//! embassy-time = "0.5"
//! ```
//!
//! A HAL's time driver sets its tick rate itself (embassy-nrf's RTC driver 32 768 Hz,
//! embassy-rp's timer 1 MHz): leave embassy-time's `tick-hz-*` features alone, as a second
//! rate does not build. Only a time driver of your own picks one there (the repository's
//! firmware, whose SysTick driver ticks at 1 kHz: `features = ["tick-hz-1_000"]`). The
//! library reads whatever rate it is.
//!
//! On `thumbv7m-none-eabi` and `thumbv7em-none-eabi(hf)` (Cortex-M3, M4, M7) that is all.
//! On `thumbv6m-none-eabi` (Cortex-M0, M0+), which has no compare-and-swap, the binary also
//! picks how `portable-atomic` makes the core's atomics: by masking interrupts, or in the
//! critical sections above (one of these lines; `deadline_core`'s docs, "On a
//! microcontroller", say more):
//!
//! ```toml
//! portable-atomic = { version = "1", default-features = false, features = ["unsafe-assume-single-core"] }
//! portable-atomic = { version = "1", default-features = false, features = ["critical-section"] }
//! ```
//!
//! # Feature flags
#![doc = document_features::document_features!()]
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod clock;
mod entropy;
mod runtime;

pub use clock::{EmbassyClock, EmbassySleep, EmbassyTimer, from_embassy, to_embassy};
pub use entropy::Entropy;
pub use runtime::Embassy;
