//! [`Followups`]: what a call keeps to decide its retries and hedges, which a deadline-only
//! call does not keep at all.

use core::time::Duration;

use crate::hedge::HedgeState;
use crate::outcome::Outcome;
use crate::retry::RetryState;
use crate::time::Instant;

/// The retry and hedge bookkeeping of one call: the state of its retries and of its hedges,
/// the live hedge delay, and the latest failure's outcome (a fatal one, or a server's "do
/// not retry", stands once seen).
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Followups {
    pub(super) retry: RetryState,
    pub(super) hedges: HedgeState,
    /// Hedge after this (such as the p95 of a live latency histogram) instead of the
    /// policy's fixed delay, when it is `Some`.
    pub(super) live_delay: Option<Duration>,
    pub(super) last_outcome: Outcome,
    /// When the backoff before the next retry ends, while the call backs off.
    pub(super) backoff_end: Instant,
    /// The latest instant the machine was polled with (a hedge due before it is late).
    pub(super) latest_poll: Instant,
    /// A fatal error or a server's "do not retry" has been seen: it stands, whatever the
    /// attempts still running do afterwards.
    pub(super) final_failure: bool,
}

impl Followups {
    /// Before the first attempt.
    pub(super) const NEW: Followups = Followups::hedging_after(None);

    /// Before the first attempt, hedging after `live` when it is `Some`. Called where a call
    /// starts, it writes the fields one by one (the constant [`NEW`](Followups::NEW) may be
    /// copied whole from read-only memory).
    #[inline]
    const fn hedging_after(live: Option<Duration>) -> Followups {
        Followups {
            retry: RetryState::new(),
            hedges: HedgeState::new(Instant::ZERO),
            live_delay: live,
            last_outcome: Outcome::Failed,
            backoff_end: Instant::ZERO,
            latest_poll: Instant::ZERO,
            final_failure: false,
        }
    }
}

/// Where a mode keeps its [`Followups`]: in a [`Full`](super::Full) call, or nowhere (`()`)
/// in a [`DeadlineOnly`](super::DeadlineOnly) one.
pub trait Kept: core::fmt::Debug {
    /// Before the first attempt.
    const NEW: Self;

    /// Before the first attempt, hedging after `live` when it is `Some` (a mode that does
    /// not hedge ignores it).
    fn starting(live: Option<Duration>) -> Self;

    /// The bookkeeping, if this mode keeps it.
    fn get(&self) -> Option<&Followups>;

    /// The bookkeeping, to change, if this mode keeps it.
    fn get_mut(&mut self) -> Option<&mut Followups>;
}

impl Kept for Followups {
    const NEW: Self = Followups::NEW;

    #[inline]
    fn starting(live: Option<Duration>) -> Self {
        Followups::hedging_after(live)
    }

    #[inline]
    fn get(&self) -> Option<&Followups> {
        Some(self)
    }

    #[inline]
    fn get_mut(&mut self) -> Option<&mut Followups> {
        Some(self)
    }
}

impl Kept for () {
    const NEW: Self = ();

    #[inline]
    fn starting(_live: Option<Duration>) -> Self {}

    #[inline]
    fn get(&self) -> Option<&Followups> {
        None
    }

    #[inline]
    fn get_mut(&mut self) -> Option<&mut Followups> {
        None
    }
}
