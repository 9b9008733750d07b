//! Backoff between attempts: exponential, with jitter.

use core::time::Duration;

/// How the backoff before a retry is randomised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Jitter {
    /// No randomness: `min(max, base * 2^n)`.
    None,
    /// AWS "full jitter": uniform in `[0, min(max, base * 2^n)]`.
    Full,
    /// AWS "equal jitter": half fixed, half uniform.
    Equal,
    /// AWS "decorrelated jitter": uniform in `[base, previous * 3]`, capped at `max`.
    Decorrelated,
    /// gRPC's form: `min(max, base * multiplier^n)` times a factor uniform in `[0.8, 1.2]`.
    Grpc,
}

/// Exponential backoff with jitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Backoff {
    /// The first backoff, before jitter.
    pub base: Duration,
    /// The largest backoff, before jitter.
    pub max: Duration,
    /// How the backoff is randomised.
    pub jitter: Jitter,
}

impl Backoff {
    /// No wait between attempts.
    pub const NONE: Backoff = Backoff {
        base: Duration::ZERO,
        max: Duration::ZERO,
        jitter: Jitter::None,
    };

    /// Exponential backoff from `base` up to `max`, with `jitter`.
    #[must_use]
    pub const fn exponential(base: Duration, max: Duration, jitter: Jitter) -> Self {
        Backoff { base, max, jitter }
    }
}
