//! [`Followups`]: what a call keeps to decide its retries and hedges, which a deadline-only
//! call does not keep at all, and a full one makes only when it needs it: a call whose first
//! attempt answers at once never does.

use core::time::Duration;

use crate::hedge::HedgeState;
use crate::outcome::Outcome;
use crate::retry::RetryState;
use crate::time::Instant;

/// The retry and hedge bookkeeping of one call: the state of its retries and of its hedges,
/// and the latest failure's outcome (a fatal one, or a server's "do not retry", stands once
/// seen).
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Followups {
    pub(super) retry: RetryState,
    pub(super) hedges: HedgeState,
    pub(super) last_outcome: Outcome,
    /// The next retry starts no earlier than this: the end of the backoff, while the call
    /// backs off, or a server's "retry after" heard on any copy (earlier than the latest
    /// poll once both have passed).
    pub(super) backoff_end: Instant,
    /// The latest instant the machine was polled with (a hedge due before it is late).
    pub(super) latest_poll: Instant,
    /// A fatal error or a server's "do not retry" has been seen: it stands, whatever the
    /// attempts still running do afterwards.
    pub(super) final_failure: bool,
    /// An attempt could send nothing, and no retry could do better (the call's time is too
    /// short, or any attempt's would be): no retry or hedge follows.
    pub(super) nothing_sent: bool,
}

impl Followups {
    /// The bookkeeping of a call whose first attempt started at `first`, as it is until the
    /// call needs it: one attempt made, hedges due from `first`, polled last at `first`.
    const fn from_start(first: Instant) -> Followups {
        Followups {
            retry: RetryState::new(),
            hedges: HedgeState::new(first),
            last_outcome: Outcome::Failed,
            backoff_end: Instant::ZERO,
            latest_poll: first,
            final_failure: false,
            nothing_sent: false,
        }
    }
}

/// A full call's [`Followups`], made the first time the call needs them (after its first
/// attempt started: a wake-up, or a failure), and the live hedge delay, known before the
/// call starts.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Later {
    /// Hedge after this (such as the p95 of a live latency histogram) instead of the
    /// policy's fixed delay, when it is `Some`.
    live_delay: Option<Duration>,
    made: Option<Followups>,
}

/// Where a mode keeps its [`Followups`]: in a [`Full`](super::Full) call ([`Later`]), or
/// nowhere (`()`) in a [`DeadlineOnly`](super::DeadlineOnly) one.
pub trait Kept: core::fmt::Debug {
    /// Before the first attempt.
    const NEW: Self;

    /// Before the first attempt, hedging after `live` when it is `Some` (a mode that does
    /// not hedge ignores it). Called where a call starts, it writes the fields one by one (the
    /// constant [`NEW`](Kept::NEW) may be copied whole from read-only memory).
    fn starting(live: Option<Duration>) -> Self;

    /// Hedge after `live` instead of the policy's delay, when it is `Some`.
    fn set_live_delay(&mut self, live: Option<Duration>);

    /// The live hedge delay (`None` in a mode that does not hedge).
    fn live_delay(&self) -> Option<Duration>;

    /// The bookkeeping, if this mode keeps it and the call has needed it.
    fn get(&self) -> Option<&Followups>;

    /// The bookkeeping of a call whose first attempt started at `first`, to change: made
    /// now if the call has not needed it yet; `None` in a mode that does not keep it.
    fn made(&mut self, first: Instant) -> Option<&mut Followups>;
}

impl Kept for Later {
    const NEW: Self = Later {
        live_delay: None,
        made: None,
    };

    #[inline]
    fn starting(live: Option<Duration>) -> Self {
        Later {
            live_delay: live,
            made: None,
        }
    }

    #[inline]
    fn set_live_delay(&mut self, live: Option<Duration>) {
        self.live_delay = live;
    }

    #[inline]
    fn live_delay(&self) -> Option<Duration> {
        self.live_delay
    }

    #[inline]
    fn get(&self) -> Option<&Followups> {
        self.made.as_ref()
    }

    #[inline]
    fn made(&mut self, first: Instant) -> Option<&mut Followups> {
        Some(
            self.made
                .get_or_insert_with(|| Followups::from_start(first)),
        )
    }
}

impl Kept for () {
    const NEW: Self = ();

    #[inline]
    fn starting(_live: Option<Duration>) -> Self {}

    #[inline]
    fn set_live_delay(&mut self, _live: Option<Duration>) {}

    #[inline]
    fn live_delay(&self) -> Option<Duration> {
        None
    }

    #[inline]
    fn get(&self) -> Option<&Followups> {
        None
    }

    #[inline]
    fn made(&mut self, _first: Instant) -> Option<&mut Followups> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_call_makes_its_bookkeeping_once_from_its_first_start() {
        let first = Instant::from_millis(10);
        let mut later = Later::starting(Some(Duration::from_millis(5)));
        assert!(later.get().is_none(), "nothing is made before it is needed");
        let made = later.made(first).expect("a full call keeps its followups");
        assert_eq!(made.hedges, HedgeState::new(first));
        assert_eq!(made.latest_poll, first);
        assert_eq!(made.retry, RetryState::new());
        made.latest_poll = Instant::from_millis(30);
        // Made once: asking again keeps what changed.
        let again = later.made(Instant::from_millis(99)).expect("kept");
        assert_eq!(again.latest_poll, Instant::from_millis(30));
        assert_eq!(later.live_delay(), Some(Duration::from_millis(5)));
    }

    #[test]
    fn a_deadline_only_call_keeps_none() {
        let mut none: () = Kept::starting(Some(Duration::from_millis(5)));
        assert!(none.made(Instant::ZERO).is_none());
        assert_eq!(none.live_delay(), None);
    }
}
