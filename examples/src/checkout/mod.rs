//! The checkout handler of the worked example on the one-line call site, as one application
//! module (`app.rs`, seen as [`on_blocking::app`] and its siblings) compiled against each
//! runtime: only the `Rt` beside it differs.

use core::time::Duration;

/// The page: the timeout each call was given, and none for a call that was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// A's timeout.
    pub profile: Duration,
    /// B's timeout.
    pub price: Duration,
    /// C's timeout, or `None` when it was skipped (its fallback is used).
    pub recommendations: Option<Duration>,
}

#[cfg(any(feature = "async-std", feature = "smol"))]
pub mod on_async_io;
pub mod on_blocking;
#[cfg(feature = "embassy")]
pub mod on_embassy;
#[cfg(feature = "tokio")]
pub mod on_tokio;
