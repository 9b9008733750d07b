//! Latency histograms sized for the target: the one a [`Dependency`](crate::Dependency) keeps,
//! the compact layout for microcontrollers, and the counters a [`Histogram`](crate::observe::Histogram)
//! may have.
//!
//! A dependency's histogram is the default [`Histogram`](crate::observe::Histogram) (736 buckets, 2 944 bytes, at most
//! 3.125% high) where the target has 64-bit atomics, which every server target has; on a
//! microcontroller without them (thumbv6m, thumbv7m, thumbv7em) it is the
//! [`CompactHistogram`] (88 buckets of 16-bit counts, 176 bytes, at most 12.5% high plus one
//! unit of 1.024 ms), so that three dependencies fit in a kilobyte and a half of RAM. Both read
//! the same way: quantiles, counts, the non-empty buckets.
//!
//! ```
//! use deadline_core::observe::{CompactHistogram, DependencyHistogram};
//! use deadline_core::ms;
//! use deadline_core::observe::Histogram;
//!
//! static LATENCY: CompactHistogram = CompactHistogram::with_layout();
//! for (n, t) in [(45, 8), (25, 11), (15, 16), (8, 24), (4, 45), (2, 90), (1, 400)] {
//!     LATENCY.record_n(ms(t), n);
//! }
//! // The p99 is 90 ms: reported at most 12.5% and one unit (1.024 ms) above, never below.
//! let p99 = LATENCY.p99().unwrap();
//! assert!(p99 >= ms(90) && p99 <= ms(90) + ms(90) / 8 + CompactHistogram::UNIT);
//! assert_eq!(CompactHistogram::SIZE_BYTES, 176);
//!
//! // On this (64-bit) host, a dependency keeps the default layout.
//! # #[cfg(target_has_atomic = "64")]
//! assert_eq!(DependencyHistogram::SIZE_BYTES, Histogram::<736, 5>::SIZE_BYTES);
//! ```

pub use crate::histogram::{CompactHistogram, Count};

/// The latency histogram a [`Dependency`](crate::Dependency) keeps, read with
/// [`Dependency::latency`](crate::Dependency::latency): [`Histogram`](crate::observe::Histogram) where the target has
/// 64-bit atomics, [`CompactHistogram`] where it has not.
#[cfg(target_has_atomic = "64")]
pub type DependencyHistogram = crate::histogram::Histogram;

/// The latency histogram a [`Dependency`](crate::Dependency) keeps, read with
/// [`Dependency::latency`](crate::Dependency::latency): [`Histogram`](crate::observe::Histogram) where the target has
/// 64-bit atomics, [`CompactHistogram`] where it has not.
#[cfg(not(target_has_atomic = "64"))]
pub type DependencyHistogram = CompactHistogram;
