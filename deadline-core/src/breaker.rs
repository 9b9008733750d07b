//! A circuit breaker: fail at once, for a cooldown, on a dependency that keeps failing.

use core::time::Duration;

use crate::sync::{AtomicU32, Ordering};

use crate::error::Error;
use crate::time::{Instant, duration_to_micros};

/// How a [`CircuitBreaker`] decides.
///
/// Start from [`BreakerConfig::DEFAULT`] and adjust it with the `with_*` methods (all
/// `const`). Out-of-range values are clamped when the breaker is built, as each field says.
///
/// ```
/// use deadline_core::ms;
/// use deadline_core::breaker::BreakerConfig;
///
/// static CONFIG: BreakerConfig = BreakerConfig::DEFAULT
///     .with_consecutive_failures(3)
///     .with_cooldown(ms(2_000))
///     .with_probes(1);
/// assert_eq!(CONFIG.consecutive_failures(), 3);
/// assert_eq!(CONFIG.failure_percent(), BreakerConfig::DEFAULT.failure_percent());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BreakerConfig {
    /// Open after this many failures in a row (at most `window`). 0: never on this rule.
    pub(crate) consecutive_failures: u32,
    /// Open when at least this percentage of the window's outcomes failed (at most 100).
    /// 0: never on this rule.
    pub(crate) failure_percent: u32,
    /// How many of the latest outcomes the window holds: 1 to [`BreakerConfig::MAX_WINDOW`].
    pub(crate) window: u32,
    /// The ratio rule applies once the window holds this many outcomes (1 to `window`).
    pub(crate) min_calls: u32,
    /// How long an open breaker fails calls at once before it lets probes through.
    pub(crate) cooldown: Duration,
    /// Calls let through in half-open (1 to [`BreakerConfig::MAX_PROBES`]); all must succeed
    /// for the breaker to close.
    pub(crate) probes: u32,
    /// How long a half-open round waits for its probes' results. After it, the next acquire
    /// starts a new round: the slots of probes that never reported are freed, and the
    /// successes reported are kept. Make it longer than a probe's call timeout.
    pub(crate) probe_timeout: Duration,
}

impl BreakerConfig {
    /// The most outcomes a window holds.
    pub const MAX_WINDOW: u32 = WINDOW_MAX;
    /// The most probes of a half-open round.
    pub const MAX_PROBES: u32 = COUNT_MASK;
    /// The longest cooldown or probe timeout: 2^26 ms, about 18.6 hours.
    pub const MAX_DURATION: Duration = Duration::from_millis(MAX_SPAN_MS as u64);

    /// Opens on 5 failures in a row, or on 50% failures among the last 20 outcomes once there
    /// are 10; stays open 5 s; then lets 3 probes through, with 10 s for their results.
    pub const DEFAULT: BreakerConfig = BreakerConfig {
        consecutive_failures: 5,
        failure_percent: 50,
        window: 20,
        min_calls: 10,
        cooldown: Duration::from_secs(5),
        probes: 3,
        probe_timeout: Duration::from_secs(10),
    };

    /// The same configuration, opening after `n` failures in a row (0: never on this rule).
    /// With this rule and the ratio's ([`with_failure_percent`](Self::with_failure_percent))
    /// both 0, the breaker never opens: the way to keep a dependency's calls from ever being
    /// refused by it.
    #[must_use]
    pub const fn with_consecutive_failures(mut self, n: u32) -> Self {
        self.consecutive_failures = n;
        self
    }

    /// The same configuration, opening at `percent` failures among the last
    /// [`window`](Self::window) outcomes, once there are [`min_calls`](Self::min_calls) of them
    /// (`percent` 0: never on this rule; with the rule of failures in a row at 0 too, the
    /// breaker never opens).
    #[must_use]
    pub const fn with_failure_percent(mut self, percent: u32) -> Self {
        self.failure_percent = percent;
        self
    }

    /// The same configuration, judging the failure ratio over the last `window` outcomes.
    #[must_use]
    pub const fn with_window(mut self, window: u32) -> Self {
        self.window = window;
        self
    }

    /// The same configuration, judging the failure ratio only once there are `min_calls`
    /// outcomes in the window.
    #[must_use]
    pub const fn with_min_calls(mut self, min_calls: u32) -> Self {
        self.min_calls = min_calls;
        self
    }

    /// The same configuration with another cooldown.
    #[must_use]
    pub const fn with_cooldown(mut self, cooldown: Duration) -> Self {
        self.cooldown = cooldown;
        self
    }

    /// The same configuration with `probes` calls let through in half-open.
    #[must_use]
    pub const fn with_probes(mut self, probes: u32) -> Self {
        self.probes = probes;
        self
    }

    /// The same configuration with another probe timeout.
    #[must_use]
    pub const fn with_probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }
    /// Open after this many failures in a row (at most `window`). 0: never on this rule.
    #[must_use]
    pub const fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Open when at least this percentage of the window's outcomes failed (at most 100).
    /// 0: never on this rule.
    #[must_use]
    pub const fn failure_percent(&self) -> u32 {
        self.failure_percent
    }

    /// How many of the latest outcomes the window holds: 1 to [`BreakerConfig::MAX_WINDOW`].
    #[must_use]
    pub const fn window(&self) -> u32 {
        self.window
    }

    /// The ratio rule applies once the window holds this many outcomes (1 to `window`).
    #[must_use]
    pub const fn min_calls(&self) -> u32 {
        self.min_calls
    }

    /// How long an open breaker fails calls at once before it lets probes through.
    #[must_use]
    pub const fn cooldown(&self) -> Duration {
        self.cooldown
    }

    /// Calls let through in half-open (1 to [`BreakerConfig::MAX_PROBES`]); all must succeed
    /// for the breaker to close.
    #[must_use]
    pub const fn probes(&self) -> u32 {
        self.probes
    }

    /// How long a half-open round waits for its probes' results. After it, the next acquire
    /// starts a new round: the slots of probes that never reported are freed, and the
    /// successes reported are kept. Make it longer than a probe's call timeout.
    #[must_use]
    pub const fn probe_timeout(&self) -> Duration {
        self.probe_timeout
    }
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The mode of a [`CircuitBreaker`], for metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go through; outcomes are counted.
    Closed,
    /// Calls fail at once. (The state changes lazily: an open breaker whose cooldown is over
    /// reads `Open` until the next [`try_acquire`](CircuitBreaker::try_acquire).)
    Open,
    /// A bounded number of probe calls go through.
    HalfOpen,
}

/// The result of a call made under a [`Permit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum BreakerOutcome {
    /// The dependency answered well.
    Success,
    /// The dependency answered with an error that says it is unhealthy (a 500, 502, 503 or
    /// another 5xx but 501, 504 and 505; a 408 or 429; `UNAVAILABLE`, `INTERNAL`; a refused
    /// connection). Errors that are the caller's fault (another 4xx) are not failures of the
    /// dependency: record them as [`BreakerOutcome::Success`]. (A 504 is a
    /// [`BreakerOutcome::Timeout`].)
    Failure,
    /// The call's timeout fired. Counted as a failure, whatever set the timeout: the cap, or
    /// a caller's deadline that left the attempt less. Callers that arrive with little time
    /// left can so open a breaker on a healthy dependency; a
    /// [floor](crate::Policy::with_floor) near the dependency's usual latency keeps the
    /// shortest of those attempts from being made at all (a call with less than the floor is
    /// skipped or refused, and the breaker hears nothing of it).
    Timeout,
    /// The result is unknown because the caller stopped waiting for reasons of its own (its
    /// request was cancelled, or a hedge won). Not counted; a probe's slot is freed at once.
    Abandoned,
}

impl BreakerOutcome {
    /// What a failed attempt, classified for retrying, means for the breaker: a timeout is a
    /// [`BreakerOutcome::Timeout`]; a refused connection, a server's failure (one a retry may
    /// fix or [`Broken`](crate::Outcome::Broken), one it would not) and a server's pushback
    /// (it is overloaded, or asks us to slow down) are [`BreakerOutcome::Failure`]s; a
    /// [`Fatal`](crate::Outcome::Fatal) answer (the request was at fault, a 4xx) is a
    /// [`BreakerOutcome::Success`], since the dependency answered.
    ///
    /// ```
    /// use deadline_core::Outcome;
    /// use deadline_core::breaker::BreakerOutcome;
    ///
    /// assert_eq!(BreakerOutcome::of_attempt(Outcome::TimedOut), BreakerOutcome::Timeout);
    /// assert_eq!(BreakerOutcome::of_attempt(Outcome::Refused), BreakerOutcome::Failure);
    /// assert_eq!(BreakerOutcome::of_attempt(Outcome::Fatal), BreakerOutcome::Success);
    /// assert_eq!(BreakerOutcome::of_attempt(Outcome::Broken), BreakerOutcome::Failure);
    /// ```
    #[must_use]
    pub const fn of_attempt(outcome: crate::Outcome) -> Self {
        use crate::outcome::Outcome as Attempt;
        match outcome {
            Attempt::TimedOut => BreakerOutcome::Timeout,
            Attempt::Refused | Attempt::Failed | Attempt::Broken | Attempt::Pushback(_) => {
                BreakerOutcome::Failure
            }
            Attempt::Fatal => BreakerOutcome::Success,
        }
    }

    /// Whether the breaker counts this outcome as a failure.
    #[must_use]
    pub const fn is_failure(self) -> bool {
        matches!(self, BreakerOutcome::Failure | BreakerOutcome::Timeout)
    }
}

/// Leave to make one call, from [`CircuitBreaker::try_acquire`]; hand it back to
/// [`CircuitBreaker::record`] with the call's [`BreakerOutcome`].
///
/// It is neither `Clone` nor `Copy`, so each permit reports one result. See the
/// [`CircuitBreaker`] documentation for what happens to a permit that never reports.
#[derive(Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "make the call, then hand the permit back to `record` with its outcome"]
pub struct Permit {
    /// The breaker's generation when the permit was issued.
    generation: u32,
    /// Whether the permit is one of a half-open round's probes.
    probe: bool,
}

impl Permit {
    /// Whether this is a half-open probe (its result decides whether the breaker closes).
    #[must_use]
    pub const fn is_probe(&self) -> bool {
        self.probe
    }

    /// The breaker's generation when the permit was issued: it changes at every transition.
    /// For logs and tests; results of an earlier generation are ignored.
    #[must_use]
    pub const fn generation(&self) -> u32 {
        self.generation
    }
}

/// The outcome window of a closed breaker, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct WindowStats {
    /// Outcomes in the window (at most the configured `window`).
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
    /// Failures in a row, most recent last.
    pub consecutive_failures: u32,
}

/// A circuit breaker, shared by every task that calls one dependency: after enough failures
/// it fails calls at once, and after a cooldown it lets a bounded number of probes through.
/// Sans-IO (each method takes `now`), lock-free, `const`: it can live in a `static`.
///
/// ```
/// use deadline_core::{Error, Instant, ms};
/// use deadline_core::breaker::{BreakerConfig, BreakerOutcome, BreakerState, CircuitBreaker};
///
/// let config = BreakerConfig::DEFAULT
///     .with_consecutive_failures(2)
///     .with_cooldown(ms(1_000))
///     .with_probes(1);
/// let breaker = CircuitBreaker::new(config);
///
/// // Two timeouts in a row open it.
/// for t in [0, 10] {
///     let now = Instant::from_millis(t);
///     let permit = breaker.try_acquire(now).unwrap();
///     breaker.record(permit, BreakerOutcome::Timeout, now);
/// }
/// assert_eq!(breaker.state(), BreakerState::Open);
/// assert_eq!(breaker.try_acquire(Instant::from_millis(500)), Err(Error::CircuitOpen));
///
/// // After the cooldown, one probe goes through, and one only.
/// let probe = breaker.try_acquire(Instant::from_millis(1_010)).unwrap();
/// assert!(probe.is_probe());
/// assert_eq!(breaker.try_acquire(Instant::from_millis(1_011)), Err(Error::CircuitOpen));
///
/// // It succeeds: the breaker closes.
/// breaker.record(probe, BreakerOutcome::Success, Instant::from_millis(1_020));
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// ```
///
/// The states, the permits, concurrency and time: [the guide](crate::guide#the-circuit-breaker).
#[derive(Debug)]
pub struct CircuitBreaker {
    /// The slow paths, through which they are linked only into a program that makes a breaker.
    slow: &'static SlowPaths,
    /// The configuration as given.
    config: BreakerConfig,
    /// The configuration clamped to what the packed words hold.
    tuned: Tuned,
    /// Mode, generation and half-open counts; see [`pack_state`].
    state: AtomicU32,
    /// The outcome window: a marker-encoded bit field and the tag of its generation.
    window: AtomicU32,
    /// The end of the current cooldown or probe round, in ms, and the tag of its generation.
    until: AtomicU32,
}

impl CircuitBreaker {
    /// A closed breaker with an empty window.
    #[must_use]
    pub const fn new(config: BreakerConfig) -> Self {
        CircuitBreaker {
            slow: &SLOW_PATHS,
            config,
            tuned: Tuned::new(&config),
            state: AtomicU32::new(pack_state(CLOSED, 0, 0, 0)),
            window: AtomicU32::new(fresh_window(0)),
            until: AtomicU32::new(0),
        }
    }

    /// The configuration the breaker was built with (before clamping).
    #[must_use]
    pub const fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// Asks leave to call the dependency at `now`.
    ///
    /// # Errors
    ///
    /// [`Error::CircuitOpen`] while the breaker is open, or half-open with all its probe slots
    /// taken. Fail the call at once: do not call the dependency.
    // A hint: a closed breaker is one load.
    #[inline]
    pub fn try_acquire(&self, now: Instant) -> Result<Permit, Error> {
        // A closed breaker lets every call through: one load.
        let s = self.state.load(Ordering::Acquire);
        if mode_of(s) == CLOSED {
            return Ok(Permit {
                generation: generation_of(s),
                probe: false,
            });
        }
        (self.slow.acquire)(self, s, now)
    }

    /// [`try_acquire`](Self::try_acquire) from state `s`, which is not closed (or was not
    /// when read).
    fn try_acquire_from(&self, mut s: u32, now: Instant) -> Result<Permit, Error> {
        let t = &self.tuned;
        loop {
            let g = generation_of(s);
            let next = match mode_of(s) {
                CLOSED => {
                    return Ok(Permit {
                        generation: g,
                        probe: false,
                    });
                }
                OPEN => {
                    if self.pending(g, now, t.cooldown_us, t.cooldown_ms) {
                        // `pending` may have read the deadline of a later generation (another
                        // thread half-opened the breaker since `s` was read): look again
                        // before refusing.
                        match self.state.load(Ordering::Acquire) {
                            again if again != s => {
                                s = again;
                                continue;
                            }
                            _ => return Err(Error::CircuitOpen),
                        }
                    }
                    pack_state(HALF_OPEN, next_generation(g), 1, 0)
                }
                _ => {
                    if !self.pending(g, now, t.probe_timeout_us, t.probe_timeout_ms) {
                        // The round is over: its silent probes lose their slots, and its
                        // successes count in the next round, so that probes coming slower
                        // than one round still close the breaker. (Fewer successes than
                        // probes, or it would have closed: a slot is free for this one.)
                        let successes = successes_of(s);
                        pack_state(
                            HALF_OPEN,
                            next_generation(g),
                            successes.saturating_add(1),
                            successes,
                        )
                    } else if issued_of(s) < t.probes {
                        pack_state(
                            HALF_OPEN,
                            g,
                            issued_of(s).saturating_add(1),
                            successes_of(s),
                        )
                    } else {
                        // All slots taken, as of `s`: refuse only if that is still the state.
                        match self.state.load(Ordering::Acquire) {
                            again if again != s => {
                                s = again;
                                continue;
                            }
                            _ => return Err(Error::CircuitOpen),
                        }
                    }
                }
            };
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    let generation = generation_of(next);
                    if generation != g {
                        // A new round starts now.
                        self.stamp(generation, now, t.probe_timeout_us);
                    }
                    return Ok(Permit {
                        generation,
                        probe: true,
                    });
                }
                Err(actual) => s = actual,
            }
        }
    }

    /// Reports the outcome of the call made under `permit`, which ended at `now`.
    ///
    /// A result from an earlier generation (the breaker has changed state since the permit
    /// was issued) is ignored.
    // The common case, a success under a closed breaker whose window holds only successes,
    // writes nothing and is a load and a compare.
    #[inline]
    pub fn record(&self, permit: Permit, outcome: BreakerOutcome, now: Instant) {
        if !permit.probe
            && matches!(outcome, BreakerOutcome::Success)
            && self.all_successes(permit.generation)
        {
            return;
        }
        (self.slow.record)(self, permit, outcome, now);
    }

    /// Whether the window of generation `g` is full, of successes only: a success into it
    /// leaves it as it is.
    #[inline]
    fn all_successes(&self, g: u32) -> bool {
        // (Such a window is its generation's tag over its marker bit alone, just past the
        // `window` outcomes: one word to compare.)
        self.window.load(Ordering::Acquire)
            == (window_tag(g) << FIELD_BITS) | self.tuned.all_successes
    }

    /// [`record`](Self::record), past its common case.
    fn record_slow(&self, permit: Permit, outcome: BreakerOutcome, now: Instant) {
        if matches!(outcome, BreakerOutcome::Abandoned) {
            self.abandon(permit);
        } else if permit.probe {
            self.record_probe(permit.generation, outcome, now);
        } else {
            self.record_call(permit.generation, outcome, now);
        }
    }

    /// Hands `permit` back unused ([`BreakerOutcome::Abandoned`]): a probe's slot is freed
    /// for another probe of its round; any other permit changes nothing. A few atomic
    /// operations and nothing that can panic: a dropped driver hands its permits back with it
    /// from a function that cannot unwind.
    #[inline]
    pub(crate) fn abandon(&self, permit: Permit) {
        if !permit.probe {
            // An abandoned call says nothing of the dependency.
            return;
        }
        (self.slow.abandon_probe)(self, permit.generation);
    }

    /// Frees the slot of an abandoned probe of generation `g`, if its round still runs.
    fn abandon_probe(&self, g: u32) {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if mode_of(s) != HALF_OPEN || generation_of(s) != g {
                return; // the round is over
            }
            let next = pack_state(
                HALF_OPEN,
                g,
                issued_of(s).saturating_sub(1),
                successes_of(s),
            );
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => s = actual,
            }
        }
    }

    /// The breaker's mode (lazily updated: see [`BreakerState::Open`]).
    #[must_use]
    pub fn state(&self) -> BreakerState {
        match mode_of(self.state.load(Ordering::Acquire)) {
            CLOSED => BreakerState::Closed,
            OPEN => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }

    /// The outcome window of the current (or latest) closed period.
    #[must_use]
    pub fn window_stats(&self) -> WindowStats {
        let field = self.window.load(Ordering::Acquire) & FIELD_MASK;
        let outcomes = outcomes_of(field);
        WindowStats {
            calls: fill_of(field),
            failures: outcomes.count_ones(),
            consecutive_failures: outcomes.trailing_ones(),
        }
    }

    /// A result under a closed breaker's permit of generation `g`.
    fn record_call(&self, g: u32, outcome: BreakerOutcome, now: Instant) {
        // (A success into a full window of successes, which leaves it as it is, has been
        // answered by `record` without a write.)
        let failed = outcome.is_failure();
        let t = &self.tuned;
        let tag = window_tag(g);
        let pushed = self
            .window
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (window_tag_of(w) == tag).then(|| push(w, failed, t.window))
            });
        let Ok(before) = pushed else {
            return; // the window belongs to a later generation
        };
        if !failed || !t.trips(push(before, failed, t.window) & FIELD_MASK) {
            return;
        }
        let open = next_generation(g);
        let tripped = self.state.compare_exchange(
            pack_state(CLOSED, g, 0, 0),
            pack_state(OPEN, open, 0, 0),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if tripped.is_ok() {
            self.stamp(open, now, t.cooldown_us);
            // Empty the window, so that late results of this closed period and its stale
            // contents are both gone by the time the breaker closes again.
            let _ = self
                .window
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    (window_tag_of(w) == tag).then_some(fresh_window(open))
                });
        }
    }

    /// A result under a probe permit of generation `g`.
    fn record_probe(&self, g: u32, outcome: BreakerOutcome, now: Instant) {
        let t = &self.tuned;
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if mode_of(s) != HALF_OPEN || generation_of(s) != g {
                return; // the round is over
            }
            let next = match outcome {
                BreakerOutcome::Failure | BreakerOutcome::Timeout => {
                    pack_state(OPEN, next_generation(g), 0, 0)
                }
                // Handed back by `abandon`, which `record_slow` calls instead.
                BreakerOutcome::Abandoned => return,
                BreakerOutcome::Success => {
                    let successes = successes_of(s).saturating_add(1);
                    if successes >= t.probes {
                        // The closed generation starts with an empty window.
                        let closed = next_generation(g);
                        let _ =
                            self.window
                                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                                    (window_tag_of(w) != window_tag(closed))
                                        .then_some(fresh_window(closed))
                                });
                        pack_state(CLOSED, closed, 0, 0)
                    } else {
                        pack_state(HALF_OPEN, g, issued_of(s), successes)
                    }
                }
            };
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    if mode_of(next) == OPEN {
                        self.stamp(generation_of(next), now, t.cooldown_us);
                    }
                    return;
                }
                Err(actual) => s = actual,
            }
        }
    }

    /// Whether the deadline of generation `g` (a cooldown or a probe round of `span_us`) is
    /// still ahead of `now`. Writes the deadline from `now` if nobody has yet.
    fn pending(&self, g: u32, now: Instant, span_us: u64, span_ms: u32) -> bool {
        let until = self.stamp(g, now, span_us);
        let ahead = until.wrapping_sub(millis_of(now)) & TIME_MASK;
        ahead != 0 && ahead <= span_ms.saturating_add(1).saturating_add(STEP_BACK_MS)
    }

    /// The deadline of generation `g`, in ms modulo 2^28: the one written, or `now + span_us`
    /// (rounded up to the next ms) written now if the word still belongs to an earlier
    /// generation.
    fn stamp(&self, g: u32, now: Instant, span_us: u64) -> u32 {
        let tag = time_tag(g);
        let end = now
            .as_micros()
            .saturating_add(span_us)
            .div_ceil(MICROS_PER_MS);
        let fresh = pack_until(tag, truncate_ms(end));
        match self
            .until
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                time_tag_is_older(time_tag_of(w), tag).then_some(fresh)
            }) {
            Ok(_) => fresh & TIME_MASK,
            Err(current) => current & TIME_MASK,
        }
    }
}

/// A breaker's slow paths: see "Code size" in the guide (`crate::guide`).
#[derive(Debug)]
struct SlowPaths {
    /// [`CircuitBreaker::try_acquire`] past a closed breaker.
    acquire: fn(&CircuitBreaker, u32, Instant) -> Result<Permit, Error>,
    /// [`CircuitBreaker::record`] past a success into a window of successes.
    record: fn(&CircuitBreaker, Permit, BreakerOutcome, Instant),
    /// [`CircuitBreaker::abandon`] of a probe's permit.
    abandon_probe: fn(&CircuitBreaker, u32),
}

/// The slow paths of every breaker.
const SLOW_PATHS: SlowPaths = SlowPaths {
    acquire: CircuitBreaker::try_acquire_from,
    record: CircuitBreaker::record_slow,
    abandon_probe: CircuitBreaker::abandon_probe,
};

impl Default for CircuitBreaker {
    fn default() -> Self {
        Self::new(BreakerConfig::DEFAULT)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for CircuitBreaker {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "CircuitBreaker {{ state: {}, window: {}, config: {} }}",
            self.state(),
            self.window_stats(),
            self.config
        );
    }
}

/// The configuration, clamped to the packed words and converted to the units they use.
#[derive(Clone, Copy, Debug)]
struct Tuned {
    /// Failures in a row that open; 0 disables.
    consecutive: u32,
    /// Percentage of failures that opens; 0 disables.
    percent: u32,
    /// Outcomes in the window.
    window: u32,
    /// The field of a full window of successes: its marker bit alone, at `window`.
    all_successes: u32,
    /// Outcomes before the ratio counts.
    min_calls: u32,
    /// The cooldown in microseconds.
    cooldown_us: u64,
    /// The cooldown in milliseconds, rounded up.
    cooldown_ms: u32,
    /// Probes per half-open round.
    probes: u32,
    /// The probe timeout in microseconds.
    probe_timeout_us: u64,
    /// The probe timeout in milliseconds, rounded up.
    probe_timeout_ms: u32,
}

impl Tuned {
    /// Clamps `c`.
    const fn new(c: &BreakerConfig) -> Self {
        let window = clamp(c.window, 1, WINDOW_MAX);
        let (cooldown_us, cooldown_ms) = span(c.cooldown);
        let (probe_timeout_us, probe_timeout_ms) = span(c.probe_timeout);
        Tuned {
            consecutive: clamp(c.consecutive_failures, 0, window),
            percent: clamp(c.failure_percent, 0, 100),
            window,
            all_successes: 1 << window,
            min_calls: clamp(c.min_calls, 1, window),
            cooldown_us,
            cooldown_ms,
            probes: clamp(c.probes, 1, COUNT_MASK),
            probe_timeout_us,
            probe_timeout_ms,
        }
    }

    /// Whether a window `field` calls for opening.
    fn trips(&self, field: u32) -> bool {
        let calls = fill_of(field);
        let outcomes = outcomes_of(field);
        let failures = outcomes.count_ones();
        let consecutive = self.consecutive != 0 && outcomes.trailing_ones() >= self.consecutive;
        let ratio = self.percent != 0
            && calls >= self.min_calls
            && failures.saturating_mul(100) >= self.percent.saturating_mul(calls);
        consecutive || ratio
    }
}

/// `v` clamped to `lo..=hi`.
const fn clamp(v: u32, lo: u32, hi: u32) -> u32 {
    if v < lo {
        lo
    } else if v > hi {
        hi
    } else {
        v
    }
}

/// A duration clamped to [`MAX_SPAN_MS`], in microseconds and in milliseconds rounded up.
const fn span(d: Duration) -> (u64, u32) {
    let max_us = (MAX_SPAN_MS as u64).saturating_mul(MICROS_PER_MS);
    let us = duration_to_micros(d);
    let us = if us > max_us { max_us } else { us };
    let ms = us.div_ceil(MICROS_PER_MS);
    // At most MAX_SPAN_MS, which fits.
    #[allow(clippy::cast_possible_truncation)]
    let ms = ms as u32;
    (us, ms)
}

// ---- the packed words -------------------------------------------------------------------

/// Mode: calls go through.
const CLOSED: u32 = 0;
/// Mode: calls fail at once.
const OPEN: u32 = 1;
/// Mode: probes go through.
const HALF_OPEN: u32 = 2;

/// State word: bits 0-1 mode.
const MODE_MASK: u32 = 0b11;
/// State word: bits 2-9 probes issued, bits 10-17 probe successes.
const COUNT_BITS: u32 = 8;
/// Mask of a count.
const COUNT_MASK: u32 = (1 << COUNT_BITS) - 1;
/// Shift of the issued count.
const ISSUED_SHIFT: u32 = 2;
/// Shift of the success count.
const SUCCESS_SHIFT: u32 = ISSUED_SHIFT + COUNT_BITS;
/// State word: bits 18-31 generation.
const GEN_SHIFT: u32 = SUCCESS_SHIFT + COUNT_BITS;
/// Mask of a generation (14 bits).
const GEN_MASK: u32 = (1 << (32 - GEN_SHIFT)) - 1;

/// The state word for `mode`, generation `g` and the half-open counts.
const fn pack_state(mode: u32, g: u32, issued: u32, successes: u32) -> u32 {
    (mode & MODE_MASK)
        | ((issued & COUNT_MASK) << ISSUED_SHIFT)
        | ((successes & COUNT_MASK) << SUCCESS_SHIFT)
        | ((g & GEN_MASK) << GEN_SHIFT)
}

/// The mode of a state word.
const fn mode_of(s: u32) -> u32 {
    s & MODE_MASK
}

/// The probes issued in a state word.
const fn issued_of(s: u32) -> u32 {
    (s >> ISSUED_SHIFT) & COUNT_MASK
}

/// The probe successes in a state word.
const fn successes_of(s: u32) -> u32 {
    (s >> SUCCESS_SHIFT) & COUNT_MASK
}

/// The generation of a state word.
const fn generation_of(s: u32) -> u32 {
    (s >> GEN_SHIFT) & GEN_MASK
}

/// The generation after `g`, wrapping.
const fn next_generation(g: u32) -> u32 {
    g.wrapping_add(1) & GEN_MASK
}

/// The most outcomes a window holds.
const WINDOW_MAX: u32 = 24;
/// Window word: bits 0-24, the outcomes (bit 0 the latest, 1 a failure) under a marker bit
/// at their count.
const FIELD_BITS: u32 = WINDOW_MAX + 1;
/// Mask of the field.
const FIELD_MASK: u32 = (1 << FIELD_BITS) - 1;
/// Window word: bits 25-31, the generation's low bits.
const WINDOW_TAG_MASK: u32 = (1 << (32 - FIELD_BITS)) - 1;

/// The window tag of generation `g`.
const fn window_tag(g: u32) -> u32 {
    g & WINDOW_TAG_MASK
}

/// The tag of a window word.
const fn window_tag_of(w: u32) -> u32 {
    (w >> FIELD_BITS) & WINDOW_TAG_MASK
}

/// An empty window for generation `g`: the marker alone.
const fn fresh_window(g: u32) -> u32 {
    (window_tag(g) << FIELD_BITS) | 1
}

/// The number of outcomes in a field: the marker's position.
const fn fill_of(field: u32) -> u32 {
    match field.checked_ilog2() {
        Some(bit) => bit,
        None => 0,
    }
}

/// The outcome bits of a field, without the marker.
const fn outcomes_of(field: u32) -> u32 {
    field & !(u32::MAX << fill_of(field))
}

/// Window word `w` with one more outcome, the oldest dropped once `len` are held.
fn push(w: u32, failed: bool, len: u32) -> u32 {
    let tag = w & !FIELD_MASK;
    let field = w & FIELD_MASK;
    let field = if field == 0 { 1 } else { field };
    let full = fill_of(field) >= len;
    let mut next = (field << 1) | u32::from(failed);
    if full {
        next = (next & !(u32::MAX << len)) | (1 << len);
    }
    tag | (next & FIELD_MASK)
}

/// Microseconds in one millisecond.
const MICROS_PER_MS: u64 = 1_000;
/// Deadline word: bits 0-27, the deadline in ms modulo 2^28.
const TIME_BITS: u32 = 28;
/// Mask of a deadline.
const TIME_MASK: u32 = (1 << TIME_BITS) - 1;
/// Deadline word: bits 28-31, the generation's low bits.
const TIME_TAG_MASK: u32 = (1 << (32 - TIME_BITS)) - 1;
/// The longest cooldown or probe timeout, in ms.
const MAX_SPAN_MS: u32 = 1 << 26;
/// How far (ms) an instant may read before the start of a cooldown and still keep it.
const STEP_BACK_MS: u32 = 1 << 16;

/// The deadline tag of generation `g`.
const fn time_tag(g: u32) -> u32 {
    g & TIME_TAG_MASK
}

/// The tag of a deadline word.
const fn time_tag_of(w: u32) -> u32 {
    (w >> TIME_BITS) & TIME_TAG_MASK
}

/// Whether deadline tag `stored` belongs to a generation before `mine` (modulo 16: a
/// deadline word is never more than a few generations behind).
const fn time_tag_is_older(stored: u32, mine: u32) -> bool {
    let behind = mine.wrapping_sub(stored) & TIME_TAG_MASK;
    behind != 0 && behind <= TIME_TAG_MASK >> 1
}

/// A deadline word.
const fn pack_until(tag: u32, ms: u32) -> u32 {
    ((tag & TIME_TAG_MASK) << TIME_BITS) | (ms & TIME_MASK)
}

/// Whole milliseconds modulo 2^28.
const fn truncate_ms(ms: u64) -> u32 {
    // Truncation is the point: deadlines are compared modulo 2^28.
    #[allow(clippy::cast_possible_truncation)]
    let ms = (ms & TIME_MASK as u64) as u32;
    ms
}

/// `now` in whole milliseconds (rounded down) modulo 2^28.
fn millis_of(now: Instant) -> u32 {
    truncate_ms(now.as_millis())
}
