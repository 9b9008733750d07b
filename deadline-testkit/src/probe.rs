//! [`Attempts`]: what happened to each attempt of a call, recorded by drop guards.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use core::time::Duration;

use deadline_core::call::Limits;
use deadline_core::{Clock, Instant};

/// The most attempts one probe records.
pub const MAX_ATTEMPTS: usize = 8;

/// No instant recorded.
const NONE: u64 = u64::MAX;

/// One attempt's record: offsets from the scenario's start, in microseconds.
#[derive(Debug)]
struct Record {
    started: AtomicU64,
    timeout: AtomicU64,
    completed: AtomicU64,
    dropped: AtomicU64,
}

impl Record {
    const fn new() -> Self {
        Record {
            started: AtomicU64::new(NONE),
            timeout: AtomicU64::new(NONE),
            completed: AtomicU64::new(NONE),
            dropped: AtomicU64::new(NONE),
        }
    }
}

/// Records each attempt of a call: when it started and with which timeout, whether it ran to
/// completion, and when its future was dropped. Times are offsets from the probe's `t0`.
///
/// It is `Sync` (atomics only), so a scenario's future stays `Send` and can be spawned.
#[derive(Debug)]
pub struct Attempts {
    t0: Instant,
    count: AtomicU32,
    records: [Record; MAX_ATTEMPTS],
}

/// What one attempt did, as seen by its probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// When it started, from `t0`.
    pub started: Duration,
    /// The timeout it was given.
    pub timeout: Duration,
    /// When it ran to completion (produced its answer), if it did.
    pub completed: Option<Duration>,
    /// When its future was dropped, if it was.
    pub dropped: Option<Duration>,
}

impl Attempts {
    /// A probe whose times are offsets from `t0`.
    #[must_use]
    pub const fn new(t0: Instant) -> Self {
        Attempts {
            t0,
            count: AtomicU32::new(0),
            records: [const { Record::new() }; MAX_ATTEMPTS],
        }
    }

    fn offset(&self, now: Instant) -> u64 {
        now.as_micros().saturating_sub(self.t0.as_micros())
    }

    /// Records the start of an attempt at `clock.now()` with `limits`, and returns its guard:
    /// keep the guard inside the attempt's future, so that dropping the future records the
    /// drop.
    ///
    /// # Panics
    ///
    /// If more than [`MAX_ATTEMPTS`] attempts start.
    pub fn begin<C: Clock>(&self, clock: C, limits: Limits) -> Guard<'_, C> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) as usize;
        let record = self
            .records
            .get(n)
            .expect("too many attempts for one probe");
        record
            .started
            .store(self.offset(clock.now()), Ordering::SeqCst);
        record
            .timeout
            .store(limits.timeout_micros(), Ordering::SeqCst);
        Guard {
            attempts: self,
            n,
            clock,
        }
    }

    /// Attempts started so far.
    #[must_use]
    pub fn started(&self) -> usize {
        self.count.load(Ordering::SeqCst) as usize
    }

    /// Attempts started whose future has not been dropped yet.
    #[must_use]
    pub fn alive(&self) -> usize {
        self.records
            .iter()
            .take(self.started())
            .filter(|r| r.dropped.load(Ordering::SeqCst) == NONE)
            .count()
    }

    /// What attempt `n` (from 0) did.
    ///
    /// # Panics
    ///
    /// If attempt `n` never started.
    #[must_use]
    pub fn seen(&self, n: usize) -> Seen {
        assert!(n < self.started(), "attempt {n} never started");
        let r = &self.records[n];
        let at = |a: &AtomicU64| match a.load(Ordering::SeqCst) {
            NONE => None,
            micros => Some(Duration::from_micros(micros)),
        };
        Seen {
            started: at(&r.started).unwrap_or_default(),
            timeout: at(&r.timeout).unwrap_or_default(),
            completed: at(&r.completed),
            dropped: at(&r.dropped),
        }
    }
}

/// Lives inside an attempt's future; records the attempt's completion and its drop.
#[derive(Debug)]
pub struct Guard<'a, C: Clock> {
    attempts: &'a Attempts,
    n: usize,
    clock: C,
}

impl<C: Clock> Guard<'_, C> {
    /// Records that the attempt ran to completion now.
    pub fn complete(&self) {
        let at = self.attempts.offset(self.clock.now());
        self.attempts.records[self.n]
            .completed
            .store(at, Ordering::SeqCst);
    }
}

impl<C: Clock> Drop for Guard<'_, C> {
    fn drop(&mut self) {
        let at = self.attempts.offset(self.clock.now());
        self.attempts.records[self.n]
            .dropped
            .store(at, Ordering::SeqCst);
    }
}
