//! [`Runtime`]: what the call site needs from a runtime, so that the same application code
//! runs on each of them.

use core::time::Duration;

use crate::deadline::Deadline;
use crate::rng::Rng;
use crate::time::{Instant, duration_to_micros_ceil, micros_to_duration};
use crate::timer::Timer;

/// A runtime as the call site sees it: its timer, its default random source, and where the
/// current deadline lives while a request's future runs.
///
/// The adapter crates implement it: `deadline_tokio::Tokio`, `deadline_std`'s
/// `AsyncIo` for async-std and smol and `Blocking` for plain threads (all three a
/// thread-local, set only while the scoped future is polled: [`ThreadDeadline`](crate::runtime::ThreadDeadline)), `deadline_embassy::Embassy` (a static behind a
/// critical section). A [`Dependency`](crate::Dependency) is built for one runtime, and its
/// one-line call reads everything else from it.
///
/// # Contract
///
/// [`enter`](Runtime::enter) makes `deadline` the one [`current`](Runtime::current) returns
/// while `f` runs, on the thread (or task) that runs it, and puts back what was there before
/// when `f` returns or unwinds. [`Scoped`](crate::runtime::Scoped) calls it around every poll
/// of the future it wraps, so the deadline follows the future across threads and tasks.
///
/// [`enter_attempt`](Runtime::enter_attempt) does the same for one poll of an attempt run in
/// its own scope ([`InScope`](crate::drive::InScope)); a runtime that keeps what an attempt
/// sent onward ([`KeepsSent`]) also returns it there.
pub trait Runtime: 'static {
    /// The runtime's timer.
    type Timer: Timer;
    /// The default random source for jitter: seeded from entropy where the platform has it.
    type Rng: Rng;

    /// The timer (a handle: cheap to make).
    fn timer() -> Self::Timer;

    /// A random source for one call's jitter, made as the call is. Every call makes one,
    /// and most draw nothing (a deadline-only dependency never does): a handle that reads its
    /// source only when it draws, as `deadline-std`'s and `deadline-embassy`'s are, costs
    /// such a call nothing.
    fn rng() -> Self::Rng;

    /// The current deadline, or `None` outside any scope.
    fn current() -> Option<Deadline>;

    /// Runs `f` with `deadline` as the current deadline (as it is: the caller takes the
    /// earlier of it and the enclosing one).
    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R;

    /// Whether the runtime keeps what an attempt sent onward: `true` for one that implements
    /// [`KeepsSent`] (and [`enter_attempt`](Runtime::enter_attempt) to return it). Where it is
    /// `false`, the attempts' futures carry no code to read it.
    const KEEPS_SENT: bool = false;

    /// [`enter`](Runtime::enter) for one poll of an attempt (or its start), also returning
    /// what was given to [`KeepsSent::note_sent`] while `f` ran ([`Onward::and`] of each),
    /// none given before counted. A runtime that does not implement [`KeepsSent`] keeps
    /// nothing: this default returns `None`, and its attempts' failures are judged by their
    /// own ends alone.
    #[inline]
    fn enter_attempt<R>(deadline: Deadline, f: impl FnOnce() -> R) -> (R, Option<Onward>) {
        (Self::enter(deadline, f), None)
    }
}

/// A [`Runtime`] that keeps what an attempt sent onward, so that a failure that comes once it
/// is running out counts as the attempt running out of time
/// ([`note_sent`](crate::runtime::note_sent)): tokio's and std's, where an adapter (reqwest)
/// sends the time left with requests whose answers the library never sees. A runtime that
/// implements it also implements [`Runtime::enter_attempt`] to return what was noted, and sets
/// [`Runtime::KEEPS_SENT`].
///
/// embassy's does not (no adapter there sends a deadline onward, and keeping it would cost
/// every attempt's poll code on a microcontroller): there, `note_sent` does not compile, and
/// code that sends the time left itself reads its deadline failures as
/// [`Outcome::TimedOut`](crate::Outcome::TimedOut) by
/// [`Sent::is_deadline_failure`](crate::wire::Sent::is_deadline_failure).
pub trait KeepsSent: Runtime {
    /// Keeps `onward` for the attempt being entered, if one is, with what was kept before
    /// ([`Onward::and`]).
    fn note_sent(onward: Onward);
}

/// What an attempt sent onward, as a runtime that [`KeepsSent`] keeps it for the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Onward {
    /// A request that told its next service a deadline running out from this instant on
    /// ([`Sent::running_out_from`](crate::wire::Sent::running_out_from)), or a database
    /// statement given a timeout that runs out from then on
    /// ([`StatementTimeout::running_out_from`](crate::statement::StatementTimeout::running_out_from)):
    /// a failure of the attempt from then on is the attempt running out of time.
    RunningOutFrom(Instant),
    /// Nothing: the request was not made, the time left being too short to send it (under
    /// the allowance one hop keeps back, [`WireError::Spent`](crate::wire::WireError::Spent),
    /// or under a statement's floor), or for a reason of the request's own (a timeout it
    /// already carried, spent). The attempt never reached the dependency: its failure is not
    /// the dependency's (its breaker does not count it). Whether a retry follows depends on
    /// whose time was short ([`CallMachine::unsent`](crate::drive::CallMachine::unsent)):
    /// what `needed_micros` says. Made with [`Onward::nothing`].
    Nothing {
        /// The least time left before the attempt's deadline with which the request would have
        /// been sent, as far as time decides it
        /// ([`Propagation::needs`](crate::wire::Propagation::needs),
        /// [`StatementPolicy::needs`](crate::statement::StatementPolicy::needs)), in whole
        /// microseconds, rounded up: more than was left when the time was what was short.
        /// (Microseconds rather than a `Duration`: a tag and a `u64` are what every attempt's
        /// poll copies, and checking a `Duration`'s niche for the tag cost a pending
        /// `Dependency::run` 31 instructions, `bash scripts/instructions.sh
        /// dependency_run_deadline_only_pending`.)
        needed_micros: u64,
    },
}

impl Onward {
    /// Nothing sent, for want of `needed` left ([`Onward::Nothing`]), rounded up to whole
    /// microseconds.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::runtime::Onward;
    ///
    /// let refused = Onward::nothing(Duration::from_nanos(5_000_001));
    /// assert_eq!(refused, Onward::Nothing { needed_micros: 5_001 });
    /// assert_eq!(refused.needed(), Some(Duration::from_micros(5_001)));
    /// ```
    #[must_use]
    pub const fn nothing(needed: Duration) -> Onward {
        Onward::Nothing {
            needed_micros: duration_to_micros_ceil(needed),
        }
    }

    /// The time a request not sent needed left ([`Onward::Nothing`]); `None` for one sent.
    #[must_use]
    pub const fn needed(self) -> Option<Duration> {
        match self {
            Onward::Nothing { needed_micros } => Some(micros_to_duration(needed_micros)),
            Onward::RunningOutFrom(_) => None,
        }
    }

    /// Both of two notes of one attempt, `other` the later: the later instant of two
    /// requests; a request sent over nothing sent (the attempt reached the dependency); of
    /// two requests not sent, the later refusal.
    ///
    /// ```
    /// use deadline_core::runtime::Onward;
    /// use deadline_core::{Instant, ms};
    ///
    /// let (early, late) = (Instant::from_millis(90), Instant::from_millis(95));
    /// let sent = Onward::RunningOutFrom(early).and(Onward::RunningOutFrom(late));
    /// assert_eq!(sent, Onward::RunningOutFrom(late));
    /// let nothing = |needed| Onward::nothing(ms(needed));
    /// assert_eq!(nothing(6).and(Onward::RunningOutFrom(early)), Onward::RunningOutFrom(early));
    /// assert_eq!(nothing(6).and(nothing(45)), nothing(45));
    /// ```
    #[must_use]
    pub fn and(self, other: Onward) -> Onward {
        match (self, other) {
            (Onward::RunningOutFrom(a), Onward::RunningOutFrom(b)) => {
                Onward::RunningOutFrom(a.max(b))
            }
            (Onward::RunningOutFrom(a), Onward::Nothing { .. })
            | (Onward::Nothing { .. }, Onward::RunningOutFrom(a)) => Onward::RunningOutFrom(a),
            (Onward::Nothing { .. }, later @ Onward::Nothing { .. }) => later,
        }
    }
}
