//! [`Counters`]: what happened to one dependency's calls, counted for export.

use core::fmt;

#[cfg(not(target_has_atomic = "64"))]
use crate::sync::AtomicU32 as Cell;
#[cfg(target_has_atomic = "64")]
use crate::sync::AtomicU64 as Cell;
use crate::sync::Ordering;

/// All ones in the counters' own width.
#[cfg(target_has_atomic = "64")]
const WRAP_MASK: u64 = u64::MAX;
/// All ones in the counters' own width.
#[cfg(not(target_has_atomic = "64"))]
const WRAP_MASK: u64 = u32::MAX as u64;

/// An increment in the counters' own width.
#[cfg(target_has_atomic = "64")]
const fn narrow(n: u32) -> u64 {
    n as u64
}
/// An increment in the counters' own width.
#[cfg(not(target_has_atomic = "64"))]
const fn narrow(n: u32) -> u32 {
    n
}

/// A counter's value as a `u64`.
#[cfg(target_has_atomic = "64")]
const fn widen(v: u64) -> u64 {
    v
}
/// A counter's value as a `u64`.
#[cfg(not(target_has_atomic = "64"))]
const fn widen(v: u32) -> u64 {
    v as u64
}

/// Something that happened to a call, counted by [`Counters::record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CounterEvent {
    /// A logical call was asked for (count it once, whatever became of it).
    Call,
    /// A call got its answer (from the first attempt, a retry or a hedge).
    Success,
    /// An attempt's timeout fired (counted per attempt: a call retried twice after timeouts
    /// counts two or three), or the attempt ran out of its own time before it could send
    /// anything (waiting for a pooled connection, say: see
    /// [`CallMachine::unsent`](crate::drive::CallMachine::unsent)), which the dependency's
    /// latency histogram, hearing only the dependency, does not count.
    Timeout,
    /// A call that was made failed because the request's deadline ran out: the deadline had
    /// passed when it gave up, or too little time was left for another attempt (its backoff
    /// would have ended past the deadline, or its timeout would have been under the floor).
    /// A call whose attempts timed out but that gave up with time to spare (attempts used
    /// up, a call that may have run, the retry budget, the breaker) counts its
    /// [`CounterEvent::Timeout`]s but not this. This is the signal to export per dependency.
    DeadlineExceeded,
    /// A call was not made because its timeout would have fallen under the floor (skipped if
    /// optional, failed at once if required).
    Skipped,
    /// A retry was sent.
    Retry,
    /// A hedged copy was sent.
    Hedge,
    /// A call's answer came from a hedged copy rather than the first attempt.
    HedgeWin,
    /// A retry or hedge was not sent because the retry-and-hedge budget was spent: a copy
    /// the budget kept from the dependency. A hedge the budget refuses is asked for again one
    /// hedge delay later, and counts once however often it is refused.
    BudgetRefusal,
    /// An attempt (a call's first, a retry or a hedge) was refused by the circuit breaker:
    /// open, or half-open with its probes taken.
    BreakerRejection,
}

impl CounterEvent {
    /// Every event, in the order of [`CounterSnapshot`]'s fields.
    pub const ALL: [CounterEvent; 10] = [
        CounterEvent::Call,
        CounterEvent::Success,
        CounterEvent::Timeout,
        CounterEvent::DeadlineExceeded,
        CounterEvent::Skipped,
        CounterEvent::Retry,
        CounterEvent::Hedge,
        CounterEvent::HedgeWin,
        CounterEvent::BudgetRefusal,
        CounterEvent::BreakerRejection,
    ];

    /// The snake-case name of the counter, as a metric suffix (`"deadline_exceeded"`), the
    /// same as the [`CounterSnapshot`] field.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            CounterEvent::Call => "calls",
            CounterEvent::Success => "successes",
            CounterEvent::Timeout => "timeouts",
            CounterEvent::DeadlineExceeded => "deadline_exceeded",
            CounterEvent::Skipped => "skipped",
            CounterEvent::Retry => "retries",
            CounterEvent::Hedge => "hedges",
            CounterEvent::HedgeWin => "hedge_wins",
            CounterEvent::BudgetRefusal => "budget_refusals",
            CounterEvent::BreakerRejection => "breaker_rejections",
        }
    }
}

/// One dependency's counters: atomic, `Sync`, `const`-constructible.
///
/// ```
/// use deadline_core::observe::{CounterEvent, Counters};
///
/// static PRICING: Counters = Counters::new();
///
/// for _ in 0..4 {
///     PRICING.record(CounterEvent::Call);
/// }
/// PRICING.record_n(CounterEvent::Success, 3);
/// PRICING.record(CounterEvent::Timeout);
/// PRICING.record(CounterEvent::DeadlineExceeded);
///
/// let s = PRICING.snapshot();
/// assert_eq!((s.calls, s.successes, s.deadline_exceeded), (4, 3, 1));
/// assert_eq!(s.deadline_exceeded_rate(), 0.25);
/// for event in CounterEvent::ALL {
///     let _metric = (event.name(), s.get(event)); // export
/// }
/// ```
///
/// One [`Counters`] per dependency, typically in a `static` beside its
/// [`Policy`](crate::Policy). Code that drives calls [`record`](Counters::record)s an
/// [`CounterEvent`]; an exporter takes a [`snapshot`](Counters::snapshot) and publishes its fields
/// (named by [`CounterEvent::name`]) and its rates, above all the
/// [`deadline_exceeded_rate`](CounterSnapshot::deadline_exceeded_rate) of each dependency.
///
/// # What is counted
///
/// A *call* is one logical call the application asked for, however many attempts it took.
/// Attempts are `calls + retries + hedges` ([`CounterSnapshot::attempts`]). A call made
/// through [`Dependency::run`](crate::Dependency::run) whose future is dropped before it ends
/// (its caller went away: a `select!`, a `try_join!`, a client that disconnected) counts as a
/// call, with the timeouts, retries and hedges it made, but neither as a success nor as
/// deadline exceeded (even when its caller left because its own deadline passed): the
/// [`success_rate`](CounterSnapshot::success_rate) counts it among the calls that did not
/// succeed.
///
/// # Width and concurrency
///
/// Every counter is one atomic, incremented with `&self`: `Counters` is `Sync` and lock-free.
/// Where the target has 64-bit atomics the counters are `u64` and never wrap in practice;
/// elsewhere (thumbv6m, thumbv7em) they are `u32`, so that they stay lock-free and safe to
/// bump from an interrupt handler, and they wrap at `2^32` like any exported counter.
/// [`CounterSnapshot::since`] takes the wrap into account, and a rate over an interval is
/// read from the difference of two snapshots.
#[derive(Default)]
pub struct Counters {
    calls: Cell,
    successes: Cell,
    timeouts: Cell,
    deadline_exceeded: Cell,
    skipped: Cell,
    retries: Cell,
    hedges: Cell,
    hedge_wins: Cell,
    budget_refusals: Cell,
    breaker_rejections: Cell,
}

impl Counters {
    /// All counters at zero.
    #[must_use]
    pub const fn new() -> Self {
        Counters {
            calls: Cell::new(0),
            successes: Cell::new(0),
            timeouts: Cell::new(0),
            deadline_exceeded: Cell::new(0),
            skipped: Cell::new(0),
            retries: Cell::new(0),
            hedges: Cell::new(0),
            hedge_wins: Cell::new(0),
            budget_refusals: Cell::new(0),
            breaker_rejections: Cell::new(0),
        }
    }

    /// Counts one `event`.
    pub fn record(&self, event: CounterEvent) {
        self.record_n(event, 1);
    }

    /// Counts `n` of `event` at once.
    pub fn record_n(&self, event: CounterEvent, n: u32) {
        // Wrapping, like any exported counter; `CounterSnapshot::since` undoes the wrap.
        // Nothing to add is not an atomic write (a call adds zero to most counters).
        if n != 0 {
            // Released: a snapshot that reads this count (acquiring it) reads every count
            // made before it too, such as the call before its outcome.
            self.cell(event).fetch_add(narrow(n), Ordering::Release);
        }
    }

    /// The current value of one counter.
    #[must_use]
    pub fn get(&self, event: CounterEvent) -> u64 {
        widen(self.cell(event).load(Ordering::Acquire))
    }

    /// Every counter, read one after the other (not one atomic read of all), in the reverse
    /// of the order a call is recorded in: its call, then its steps (timeouts, retries,
    /// hedges, refusals), then its outcome (a success and a hedge's win, a deadline
    /// exceeded, a skip). A snapshot taken while calls are recorded never counts an outcome
    /// without its steps and its call (no more successes than calls, no more hedge wins
    /// than hedges); it may count a call whose outcome is not counted yet.
    #[must_use]
    pub fn snapshot(&self) -> CounterSnapshot {
        let successes = self.get(CounterEvent::Success);
        let hedge_wins = self.get(CounterEvent::HedgeWin);
        let deadline_exceeded = self.get(CounterEvent::DeadlineExceeded);
        let skipped = self.get(CounterEvent::Skipped);
        let timeouts = self.get(CounterEvent::Timeout);
        let retries = self.get(CounterEvent::Retry);
        let hedges = self.get(CounterEvent::Hedge);
        let budget_refusals = self.get(CounterEvent::BudgetRefusal);
        let breaker_rejections = self.get(CounterEvent::BreakerRejection);
        CounterSnapshot {
            calls: self.get(CounterEvent::Call),
            successes,
            timeouts,
            deadline_exceeded,
            skipped,
            retries,
            hedges,
            hedge_wins,
            budget_refusals,
            breaker_rejections,
        }
    }

    /// The counter of `event`.
    const fn cell(&self, event: CounterEvent) -> &Cell {
        match event {
            CounterEvent::Call => &self.calls,
            CounterEvent::Success => &self.successes,
            CounterEvent::Timeout => &self.timeouts,
            CounterEvent::DeadlineExceeded => &self.deadline_exceeded,
            CounterEvent::Skipped => &self.skipped,
            CounterEvent::Retry => &self.retries,
            CounterEvent::Hedge => &self.hedges,
            CounterEvent::HedgeWin => &self.hedge_wins,
            CounterEvent::BudgetRefusal => &self.budget_refusals,
            CounterEvent::BreakerRejection => &self.breaker_rejections,
        }
    }
}

impl fmt::Debug for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.snapshot(), f)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Counters {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::Format::format(&self.snapshot(), f);
    }
}

/// The counters of one dependency at one moment: plain numbers, with derived rates.
///
/// The field names are the [`CounterEvent::name`]s. Every rate is 0 when its denominator is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct CounterSnapshot {
    /// Logical calls asked for ([`CounterEvent::Call`]).
    pub calls: u64,
    /// Calls answered ([`CounterEvent::Success`]).
    pub successes: u64,
    /// Attempts whose timeout fired, or that ran out of their own time before they could send
    /// ([`CounterEvent::Timeout`]).
    pub timeouts: u64,
    /// Calls failed for lack of time ([`CounterEvent::DeadlineExceeded`]).
    pub deadline_exceeded: u64,
    /// Calls not made because the time left was under the floor ([`CounterEvent::Skipped`]).
    pub skipped: u64,
    /// Retries sent ([`CounterEvent::Retry`]).
    pub retries: u64,
    /// Hedged copies sent ([`CounterEvent::Hedge`]).
    pub hedges: u64,
    /// Calls won by a hedged copy ([`CounterEvent::HedgeWin`]).
    pub hedge_wins: u64,
    /// Retries and hedges the budget refused ([`CounterEvent::BudgetRefusal`]: a hedge
    /// refused is asked for again a delay later, and counts once however often it is
    /// refused).
    pub budget_refusals: u64,
    /// Attempts the breaker refused: a call's first (the call was not made), a retry or a
    /// hedge ([`CounterEvent::BreakerRejection`]).
    pub breaker_rejections: u64,
}

impl CounterSnapshot {
    /// The value of one counter.
    #[must_use]
    pub const fn get(&self, event: CounterEvent) -> u64 {
        match event {
            CounterEvent::Call => self.calls,
            CounterEvent::Success => self.successes,
            CounterEvent::Timeout => self.timeouts,
            CounterEvent::DeadlineExceeded => self.deadline_exceeded,
            CounterEvent::Skipped => self.skipped,
            CounterEvent::Retry => self.retries,
            CounterEvent::Hedge => self.hedges,
            CounterEvent::HedgeWin => self.hedge_wins,
            CounterEvent::BudgetRefusal => self.budget_refusals,
            CounterEvent::BreakerRejection => self.breaker_rejections,
        }
    }

    /// What was counted between `earlier` and `self`, correct across one wrap of the
    /// counters' native width. Read rates over an interval from this.
    #[must_use]
    pub const fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        /// `now - then` in the counters' width.
        const fn delta(now: u64, then: u64) -> u64 {
            now.wrapping_sub(then) & WRAP_MASK
        }
        CounterSnapshot {
            calls: delta(self.calls, earlier.calls),
            successes: delta(self.successes, earlier.successes),
            timeouts: delta(self.timeouts, earlier.timeouts),
            deadline_exceeded: delta(self.deadline_exceeded, earlier.deadline_exceeded),
            skipped: delta(self.skipped, earlier.skipped),
            retries: delta(self.retries, earlier.retries),
            hedges: delta(self.hedges, earlier.hedges),
            hedge_wins: delta(self.hedge_wins, earlier.hedge_wins),
            budget_refusals: delta(self.budget_refusals, earlier.budget_refusals),
            breaker_rejections: delta(self.breaker_rejections, earlier.breaker_rejections),
        }
    }

    /// Attempts sent: `calls + retries + hedges` (saturating). Skipped and rejected calls
    /// are among the calls, so this is an upper bound on what reached the dependency.
    #[must_use]
    pub const fn attempts(&self) -> u64 {
        self.calls
            .saturating_add(self.retries)
            .saturating_add(self.hedges)
    }

    /// `deadline_exceeded / calls`: the share of calls that failed for lack of time. The
    /// number to export and watch per dependency.
    #[must_use]
    pub fn deadline_exceeded_rate(&self) -> f64 {
        ratio(self.deadline_exceeded, self.calls)
    }

    /// `successes / calls`.
    #[must_use]
    pub fn success_rate(&self) -> f64 {
        ratio(self.successes, self.calls)
    }

    /// `timeouts / attempts`: the share of attempts abandoned, for any reason (the cap, the
    /// caller's deadline, no time left to send). Not the advice's kill fraction, which counts
    /// only the latencies the cap cut; and [`attempts`](Self::attempts) counts skipped and
    /// refused calls too.
    #[must_use]
    pub fn timeout_rate(&self) -> f64 {
        ratio(self.timeouts, self.attempts())
    }

    /// `skipped / calls`: calls not made for want of time.
    #[must_use]
    pub fn skip_rate(&self) -> f64 {
        ratio(self.skipped, self.calls)
    }

    /// `(retries + hedges) / calls`: the extra load retries and hedges add. A retry budget of
    /// 10% keeps it near 0.1 under sustained failure.
    #[must_use]
    pub fn amplification(&self) -> f64 {
        ratio(self.retries.saturating_add(self.hedges), self.calls)
    }

    /// `hedge_wins / hedges`: how often a hedged copy beat the first attempt.
    #[must_use]
    pub fn hedge_win_rate(&self) -> f64 {
        ratio(self.hedge_wins, self.hedges)
    }

    /// `breaker_rejections / calls`: the refused retries and hedges are among the rejections,
    /// so this can exceed the share of calls the breaker refused.
    #[must_use]
    pub fn breaker_rejection_rate(&self) -> f64 {
        ratio(self.breaker_rejections, self.calls)
    }
}

/// `num / den`; 0 when `den` is 0.
fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}
