//! The retry-and-hedge budget: a token bucket fed by a percentage of the original calls, plus a
//! small floor per second, shared lock-free by every task that calls one dependency.

use crate::sync::{AtomicU32, Ordering};

use crate::time::Instant;

/// Milli-tokens in one token: the cost of one retry or hedge.
const MILLI_PER_TOKEN: u32 = 1_000;
/// Microseconds in one floor window.
const MICROS_PER_WINDOW: u64 = 1_000_000;
/// Bits of the floor word holding the grants used in the current window.
const USED_BITS: u32 = 10;
/// Mask of the grants used.
const USED_MASK: u32 = (1 << USED_BITS) - 1;
/// Bits of the floor word holding the window (second) number, modulo `2^WINDOW_BITS`.
const WINDOW_BITS: u32 = 32 - USED_BITS;
/// Mask of a window number.
const WINDOW_MASK: u32 = (1 << WINDOW_BITS) - 1;
/// How many windows (seconds) back an instant may read and still be counted in the stored
/// window: a reading taken a little before another thread's, which stored a later window
/// first. Any other window reads as later, however long the budget went without a floor
/// grant (a quiet device may go weeks; the window numbers wrap every 2^22 s, 48.5 days).
const STEP_BACK_WINDOWS: u32 = 64;
/// The floor word of a budget that has not drawn on its floor yet, so that the first instant
/// seen always opens a window. Zero, so that a budget in a `static` starts as zeroed memory
/// does: a drawn window always has a grant used (at least 1 in its "used" field), so no drawn
/// window's word is zero.
const NO_WINDOW: u32 = 0;

/// One budget shared by the retries and the hedges of a dependency (or a whole client): a
/// share of the calls (10% by default) and a small floor per second. Call
/// [`deposit`](Self::deposit) once per original call and [`try_withdraw`](Self::try_withdraw)
/// before each retry or hedge, and send the extra call only when it returns `true`.
/// Lock-free and `const`: one budget in a `static` serves every task and thread.
///
/// ```
/// use deadline_core::Instant;
/// use deadline_core::budget::RetryBudget;
///
/// // 10% of calls, no floor: ten calls buy exactly one retry.
/// static BUDGET: RetryBudget = RetryBudget::percent(10).with_floor_per_sec(0);
/// let now = Instant::from_millis(5);
/// for _ in 0..10 {
///     BUDGET.deposit(now);
/// }
/// assert!(BUDGET.try_withdraw(now));
/// assert!(!BUDGET.try_withdraw(now));
///
/// // With a floor of 2 per second, a client with no traffic still gets 2 retries a second.
/// let quiet = RetryBudget::percent(10).with_floor_per_sec(2);
/// let t = Instant::from_secs(7);
/// assert!(quiet.try_withdraw(t) && quiet.try_withdraw(t));
/// assert!(!quiet.try_withdraw(t));
/// assert!(quiet.try_withdraw(Instant::from_secs(8)));
/// ```
///
/// The bound it keeps, and how it differs from tower's `TpsBudget`: [the guide](crate::guide#the-retry-budget).
#[derive(Debug)]
pub struct RetryBudget {
    /// Milli-tokens one deposit adds: 10 x the percentage.
    deposit_milli: u32,
    /// Floor grants per second.
    floor_per_sec: u32,
    /// The most milli-tokens the balance holds.
    max_milli: u32,
    /// The balance, in milli-tokens.
    balance: AtomicU32,
    /// The floor window: `window number << USED_BITS | grants used`, or [`NO_WINDOW`].
    floor: AtomicU32,
}

impl RetryBudget {
    /// The default ratio: 10 extra calls per 100 original calls (the SRE book's rule: "at
    /// most 10% extra calls").
    pub const DEFAULT_PERCENT: u32 = 10;
    /// The default floor: 10 extra calls per second whatever the traffic (tower's and
    /// Finagle's default too).
    pub const DEFAULT_FLOOR_PER_SEC: u32 = 10;
    /// The default cap on banked tokens: 100 retries or hedges.
    pub const DEFAULT_MAX_BALANCE: u32 = 100;
    /// The largest floor per second; larger values are clamped to it.
    pub const MAX_FLOOR_PER_SEC: u32 = USED_MASK - 1;
    /// The largest cap on banked tokens; larger values are clamped to it.
    pub const MAX_BALANCE: u32 = u32::MAX / MILLI_PER_TOKEN;

    /// A budget that allows `percent` extra calls per 100 original calls, plus
    /// [`DEFAULT_FLOOR_PER_SEC`](Self::DEFAULT_FLOOR_PER_SEC) extra calls per second whatever
    /// the traffic (see [`with_floor_per_sec`](Self::with_floor_per_sec)), with at most
    /// [`DEFAULT_MAX_BALANCE`](Self::DEFAULT_MAX_BALANCE) tokens banked.
    ///
    /// `percent` may exceed 100 (200 means two extra calls per call). The balance starts
    /// empty.
    ///
    /// ```
    /// use deadline_core::budget::RetryBudget;
    ///
    /// static BUDGET: RetryBudget = RetryBudget::percent(10).with_floor_per_sec(5);
    /// assert_eq!(BUDGET.ratio_per_mille(), 100);
    /// assert_eq!(BUDGET.floor_per_sec(), 5);
    /// ```
    #[must_use]
    pub const fn percent(percent: u32) -> Self {
        Self::per_mille(percent.saturating_mul(10))
    }

    /// A budget that allows `per_mille` extra calls per 1000 original calls (25 is 2.5%).
    /// Otherwise as [`percent`](Self::percent).
    #[must_use]
    pub const fn per_mille(per_mille: u32) -> Self {
        RetryBudget {
            deposit_milli: per_mille,
            floor_per_sec: Self::DEFAULT_FLOOR_PER_SEC,
            max_milli: Self::DEFAULT_MAX_BALANCE.saturating_mul(MILLI_PER_TOKEN),
            balance: AtomicU32::new(0),
            floor: AtomicU32::new(NO_WINDOW),
        }
    }

    /// The same budget allowing `floor_per_sec` extra calls per second whatever the traffic
    /// (0 for none), clamped to [`MAX_FLOOR_PER_SEC`](Self::MAX_FLOOR_PER_SEC). Call it
    /// before the budget is shared: it returns a fresh, empty budget.
    #[must_use]
    pub const fn with_floor_per_sec(self, floor_per_sec: u32) -> Self {
        let floor_per_sec = if floor_per_sec > Self::MAX_FLOOR_PER_SEC {
            Self::MAX_FLOOR_PER_SEC
        } else {
            floor_per_sec
        };
        RetryBudget {
            deposit_milli: self.deposit_milli,
            floor_per_sec,
            max_milli: self.max_milli,
            balance: AtomicU32::new(0),
            floor: AtomicU32::new(NO_WINDOW),
        }
    }

    /// The same budget with at most `tokens` retries or hedges banked from deposits (clamped
    /// to [`MAX_BALANCE`](Self::MAX_BALANCE)); deposits beyond it are dropped. 0 disables the
    /// deposits altogether, leaving only the floor. Call it before the budget is shared: it
    /// returns a fresh, empty budget.
    ///
    /// ```
    /// use deadline_core::Instant;
    /// use deadline_core::budget::RetryBudget;
    ///
    /// let budget = RetryBudget::percent(50).with_floor_per_sec(0).with_max_balance(2);
    /// let now = Instant::ZERO;
    /// for _ in 0..100 {
    ///     budget.deposit(now);
    /// }
    /// assert_eq!(budget.balance(), 2);
    /// ```
    #[must_use]
    pub const fn with_max_balance(self, tokens: u32) -> Self {
        let tokens = if tokens > Self::MAX_BALANCE {
            Self::MAX_BALANCE
        } else {
            tokens
        };
        RetryBudget {
            deposit_milli: self.deposit_milli,
            floor_per_sec: self.floor_per_sec,
            max_milli: tokens.saturating_mul(MILLI_PER_TOKEN),
            balance: AtomicU32::new(0),
            floor: AtomicU32::new(NO_WINDOW),
        }
    }

    /// Records one original call (not a retry or a hedge) at `now`.
    ///
    /// Adds the ratio's share of a token to the balance, up to the cap. `now` is accepted so
    /// that every method of the budget reads the same way; deposits do not expire.
    // The common case, a budget already full, is a load and a compare.
    #[inline]
    pub fn deposit(&self, now: Instant) {
        if self.balance.load(Ordering::Acquire) >= self.max_milli {
            // Full: nothing to add (and no read-modify-write on a healthy dependency).
            return;
        }
        self.deposit_below_cap(now);
    }

    /// [`deposit`](Self::deposit) into a balance under the cap.
    fn deposit_below_cap(&self, now: Instant) {
        let _ = now;
        let (add, max) = (self.deposit_milli, self.max_milli);
        // `None` when the balance is already at the cap: nothing to write.
        let _ = self
            .balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                let next = b.saturating_add(add).min(max);
                (next != b).then_some(next)
            });
    }

    /// Takes the allowance for one retry or hedge at `now`; `false` when the budget is spent.
    ///
    /// A whole token comes from the deposits when the balance holds one, and otherwise from
    /// the floor of `now`'s second. A refusal changes nothing.
    #[must_use = "send the retry or hedge only when the budget grants it"]
    pub fn try_withdraw(&self, now: Instant) -> bool {
        self.withdraw_deposit() || self.withdraw_floor(now)
    }

    /// Takes one token from the deposits, in one compare-and-swap.
    fn withdraw_deposit(&self) -> bool {
        self.balance
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                b.checked_sub(MILLI_PER_TOKEN)
            })
            .is_ok()
    }

    /// Takes one grant from the floor of `now`'s second, in one compare-and-swap.
    fn withdraw_floor(&self, now: Instant) -> bool {
        let floor = self.floor_per_sec;
        if floor == 0 {
            return false;
        }
        let window = window_of(now);
        self.floor
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                let (current, used) = current_window(word, window);
                (used < floor).then(|| pack(current, used.saturating_add(1)))
            })
            .is_ok()
    }

    /// Whole tokens banked from deposits (rounded down).
    #[must_use]
    pub fn balance(&self) -> u32 {
        self.balance_milli()
            .checked_div(MILLI_PER_TOKEN)
            .unwrap_or(0)
    }

    /// The balance in milli-tokens: 1000 buys one retry or hedge.
    #[must_use]
    pub fn balance_milli(&self) -> u32 {
        self.balance.load(Ordering::Acquire)
    }

    /// Floor grants still available in `now`'s second (an instant before the current window
    /// reads the current window, as in [`try_withdraw`](Self::try_withdraw)).
    #[must_use]
    pub fn floor_left(&self, now: Instant) -> u32 {
        let (_, used) = current_window(self.floor.load(Ordering::Acquire), window_of(now));
        self.floor_per_sec.saturating_sub(used)
    }

    /// Extra calls the budget would grant at `now` if asked right away, with no deposits in
    /// between: the whole banked tokens plus the floor left. For metrics.
    #[must_use]
    pub fn available(&self, now: Instant) -> u32 {
        self.balance().saturating_add(self.floor_left(now))
    }

    /// Extra calls allowed per 1000 original calls.
    #[must_use]
    pub const fn ratio_per_mille(&self) -> u32 {
        self.deposit_milli
    }

    /// Extra calls allowed per second whatever the traffic.
    #[must_use]
    pub const fn floor_per_sec(&self) -> u32 {
        self.floor_per_sec
    }

    /// The most tokens the balance holds.
    #[must_use]
    pub const fn max_balance(&self) -> u32 {
        self.max_milli / MILLI_PER_TOKEN
    }
}

impl Default for RetryBudget {
    /// [`DEFAULT_PERCENT`](Self::DEFAULT_PERCENT) with a floor of
    /// [`DEFAULT_FLOOR_PER_SEC`](Self::DEFAULT_FLOOR_PER_SEC).
    fn default() -> Self {
        Self::percent(Self::DEFAULT_PERCENT)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for RetryBudget {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "RetryBudget {{ per_mille: {}, floor_per_sec: {}, max_balance: {}, balance_milli: {} }}",
            self.deposit_milli,
            self.floor_per_sec,
            self.max_balance(),
            self.balance_milli()
        );
    }
}

/// The floor window (second, modulo `2^WINDOW_BITS`) of `now`.
fn window_of(now: Instant) -> u32 {
    let second = now.as_micros().checked_div(MICROS_PER_WINDOW).unwrap_or(0);
    // Truncation is the point: window numbers are compared modulo 2^WINDOW_BITS.
    #[allow(clippy::cast_possible_truncation)]
    let window = (second & u64::from(WINDOW_MASK)) as u32;
    window
}

/// The window a grant at `window` is counted in, and the grants already used in it, given the
/// floor word: the stored window when `window` is the same or at most
/// [`STEP_BACK_WINDOWS`] before it (a reading a little behind another thread's), else
/// `window` itself, fresh, with nothing used. (A reading up to 64 s short of an exact multiple
/// of 2^22 s later is taken for the stored window: for at most a minute, what that second had
/// left, once in 48.5 days of quiet.)
fn current_window(word: u32, window: u32) -> (u32, u32) {
    if word == NO_WINDOW {
        return (window, 0);
    }
    let stored = word.checked_shr(USED_BITS).unwrap_or(0);
    let behind = stored.wrapping_sub(window) & WINDOW_MASK;
    if behind <= STEP_BACK_WINDOWS {
        (stored, word & USED_MASK)
    } else {
        (window, 0)
    }
}

/// The floor word for `window` with `used` grants.
fn pack(window: u32, used: u32) -> u32 {
    (window & WINDOW_MASK).checked_shl(USED_BITS).unwrap_or(0) | (used & USED_MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_budget_is_all_zeros_and_a_drawn_window_never_is() {
        let budget = RetryBudget::percent(10)
            .with_floor_per_sec(2)
            .with_max_balance(5);
        assert_eq!(budget.balance.load(Ordering::Relaxed), 0);
        assert_eq!(budget.floor.load(Ordering::Relaxed), 0);
        // The first floor grant, in window 0 itself, leaves a word that is not "no window".
        assert!(budget.try_withdraw(Instant::ZERO));
        assert_eq!(budget.floor.load(Ordering::Relaxed), pack(0, 1));
        assert_ne!(budget.floor.load(Ordering::Relaxed), NO_WINDOW);
        assert!(budget.try_withdraw(Instant::from_millis(999)));
        assert!(!budget.try_withdraw(Instant::from_millis(999)));
        assert!(budget.try_withdraw(Instant::from_secs(1)));
    }
}
