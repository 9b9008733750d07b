//! The retry-and-hedge budget: exact ratios, the floor per second, the cap, clocks that step
//! back, and threads racing for tokens.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use deadline_core::Instant;
use deadline_core::budget::RetryBudget;

/// Withdraws at `now` until refused; returns the grants. Bounded: at one instant no budget
/// grants more than its largest balance and a second's largest floor, so one that grants
/// more grants without end.
fn drain(budget: &RetryBudget, now: Instant) -> u64 {
    let most = u64::from(RetryBudget::MAX_BALANCE) + u64::from(RetryBudget::MAX_FLOOR_PER_SEC);
    let mut granted = 0;
    while budget.try_withdraw(now) {
        granted += 1;
        assert!(granted <= most, "the budget never refused");
    }
    granted
}

/// Whole retries that `deposits` calls buy at `per_mille`, computed independently of the
/// budget: exact rational arithmetic, rounded down.
fn bought(deposits: u64, per_mille: u64) -> u64 {
    deposits * per_mille / 1000
}

/// Runs `threads` threads against one budget, released together; thread `t` calls
/// `step(t, i)` for each `i` in `0..ops`, which reports (deposits made, grants taken).
/// Returns the totals over every thread.
fn race(threads: u64, ops: u64, step: impl Fn(u64, u64) -> (u64, u64) + Sync) -> (u64, u64) {
    let deposits = AtomicU64::new(0);
    let granted = AtomicU64::new(0);
    let start = Barrier::new(threads as usize);
    thread::scope(|s| {
        for t in 0..threads {
            let (deposits, granted, start, step) = (&deposits, &granted, &start, &step);
            s.spawn(move || {
                let (mut d, mut g) = (0, 0);
                start.wait();
                for i in 0..ops {
                    let (dd, gg) = step(t, i);
                    d += dd;
                    g += gg;
                }
                deposits.fetch_add(d, Ordering::Relaxed);
                granted.fetch_add(g, Ordering::Relaxed);
            });
        }
    });
    (deposits.into_inner(), granted.into_inner())
}

#[test]
fn ten_deposits_at_ten_percent_buy_exactly_one_retry() {
    let budget = RetryBudget::percent(10).with_floor_per_sec(0);
    let now = Instant::from_millis(1);
    for _ in 0..9 {
        budget.deposit(now);
    }
    assert!(!budget.try_withdraw(now), "9 deposits are 0.9 of a retry");
    budget.deposit(now);
    assert!(budget.try_withdraw(now));
    assert!(!budget.try_withdraw(now));
    assert_eq!(budget.balance_milli(), 0);
}

#[test]
fn whole_percentages_are_exact() {
    // 60% is the case of tower's issue 857 (its `TpsBudget` grants more than configured): a truncated reciprocal there grants 10 of 10.
    for percent in [1u32, 3, 7, 10, 33, 60, 99, 100, 150, 250] {
        for deposits in [0u64, 1, 9, 10, 11, 99, 100, 101, 997] {
            let budget = RetryBudget::percent(percent)
                .with_floor_per_sec(0)
                .with_max_balance(RetryBudget::MAX_BALANCE);
            let now = Instant::ZERO;
            for _ in 0..deposits {
                budget.deposit(now);
            }
            assert_eq!(
                drain(&budget, now),
                bought(deposits, u64::from(percent) * 10),
                "{percent}% of {deposits}"
            );
        }
    }
}

#[test]
fn per_mille_ratios_are_exact() {
    let budget = RetryBudget::per_mille(25)
        .with_floor_per_sec(0)
        .with_max_balance(RetryBudget::MAX_BALANCE);
    let now = Instant::ZERO;
    for _ in 0..39 {
        budget.deposit(now);
    }
    assert_eq!(drain(&budget, now), bought(39, 25));
    budget.deposit(now);
    assert_eq!(drain(&budget, now), bought(40, 25) - bought(39, 25));
}

#[test]
fn the_default_is_ten_percent_with_a_floor() {
    let budget = RetryBudget::default();
    assert_eq!(budget.ratio_per_mille(), RetryBudget::DEFAULT_PERCENT * 10);
    let now = Instant::from_secs(3);
    // No deposits: the floor alone.
    assert_eq!(
        drain(&budget, now),
        u64::from(RetryBudget::DEFAULT_FLOOR_PER_SEC)
    );
    for _ in 0..100 {
        budget.deposit(now);
    }
    assert_eq!(
        drain(&budget, now),
        bought(100, u64::from(RetryBudget::DEFAULT_PERCENT) * 10)
    );
}

#[test]
fn a_refusal_changes_nothing() {
    let budget = RetryBudget::percent(10).with_floor_per_sec(0);
    let now = Instant::ZERO;
    for _ in 0..7 {
        budget.deposit(now);
    }
    let before = budget.balance_milli();
    assert!(!budget.try_withdraw(now));
    assert_eq!(budget.balance_milli(), before);
    for _ in 0..3 {
        budget.deposit(now);
    }
    assert!(budget.try_withdraw(now), "the refused attempt took nothing");
}

#[test]
fn the_floor_is_per_second_and_cannot_be_saved() {
    let floor = 3;
    let budget = RetryBudget::percent(10).with_floor_per_sec(floor);
    let s5 = Instant::from_secs(5);
    assert_eq!(budget.floor_left(s5), floor);
    assert_eq!(drain(&budget, s5), u64::from(floor));
    assert_eq!(budget.floor_left(s5), 0);
    // Later in the same second: nothing more.
    assert_eq!(drain(&budget, Instant::from_millis(5_999)), 0);
    // The next second: the floor again, not twice the floor after an idle second.
    assert_eq!(drain(&budget, Instant::from_secs(6)), u64::from(floor));
    assert_eq!(drain(&budget, Instant::from_secs(8)), u64::from(floor));
}

#[test]
fn deposits_are_spent_before_the_floor() {
    let budget = RetryBudget::percent(50).with_floor_per_sec(2);
    let now = Instant::from_secs(1);
    for _ in 0..4 {
        budget.deposit(now);
    }
    assert!(budget.try_withdraw(now) && budget.try_withdraw(now));
    assert_eq!(budget.balance(), 0);
    assert_eq!(budget.floor_left(now), 2, "the floor is untouched");
    assert_eq!(drain(&budget, now), 2);
}

#[test]
fn the_balance_is_capped() {
    let cap = 3;
    let budget = RetryBudget::percent(100)
        .with_floor_per_sec(0)
        .with_max_balance(cap);
    assert_eq!(budget.max_balance(), cap);
    let now = Instant::ZERO;
    for _ in 0..50 {
        budget.deposit(now);
    }
    assert_eq!(budget.balance(), cap);
    assert_eq!(drain(&budget, now), u64::from(cap));
    // A cap of zero leaves the floor alone.
    let floor_only = RetryBudget::percent(100)
        .with_floor_per_sec(1)
        .with_max_balance(0);
    for _ in 0..50 {
        floor_only.deposit(now);
    }
    assert_eq!(drain(&floor_only, now), 1);
}

#[test]
fn out_of_range_settings_are_clamped() {
    let budget = RetryBudget::percent(u32::MAX)
        .with_floor_per_sec(u32::MAX)
        .with_max_balance(u32::MAX);
    assert_eq!(budget.floor_per_sec(), RetryBudget::MAX_FLOOR_PER_SEC);
    assert_eq!(budget.max_balance(), RetryBudget::MAX_BALANCE);
    let now = Instant::MAX;
    budget.deposit(now);
    assert_eq!(budget.balance(), RetryBudget::MAX_BALANCE);
    assert_eq!(
        drain(&budget, now),
        u64::from(RetryBudget::MAX_BALANCE) + u64::from(RetryBudget::MAX_FLOOR_PER_SEC)
    );
}

#[test]
fn a_reading_up_to_a_minute_behind_mints_nothing() {
    let floor = 4;
    let budget = RetryBudget::percent(0).with_floor_per_sec(floor);
    let later = Instant::from_secs(1_000_000);
    assert_eq!(drain(&budget, later), u64::from(floor));
    // Readings up to 64 s earlier (a thread that read the clock before another one stored a
    // later second): all counted in the current window, which is spent.
    for back_secs in [1u64, 2, 59, 64] {
        let earlier = Instant::from_secs(1_000_000 - back_secs);
        assert!(!budget.try_withdraw(earlier), "{back_secs} s back");
        assert_eq!(budget.floor_left(earlier), 0);
    }
    // Time moving on again opens the next window, once.
    assert_eq!(
        drain(&budget, Instant::from_secs(1_000_001)),
        u64::from(floor)
    );
    assert_eq!(drain(&budget, Instant::from_secs(1_000_000)), 0);
}

/// A device that draws on its floor once in a long while gets it whole each time, however
/// long the quiet spell: the window numbers wrap every 2^22 s (48.5 days), and a spell of
/// half that or more once read as a step back, withholding the floor for up to 24 days more.
#[test]
fn a_quiet_spell_of_any_length_opens_a_fresh_window() {
    const RING: u64 = 1 << 22;
    let start = 1_000_000;
    for quiet_secs in [
        65,
        3_600,
        RING / 2 - 1,
        RING / 2,
        25 * 86_400,
        40 * 86_400,
        RING - 65,
        RING + 1,
        RING + 25 * 86_400,
        3 * RING + 100,
    ] {
        let budget = RetryBudget::percent(0).with_floor_per_sec(3);
        assert_eq!(drain(&budget, Instant::from_secs(start)), 3);
        let later = Instant::from_secs(start + quiet_secs);
        assert_eq!(budget.floor_left(later), 3, "{quiet_secs} s later");
        assert_eq!(drain(&budget, later), 3, "{quiet_secs} s later");
    }
}

#[test]
fn the_first_window_may_be_anywhere() {
    // A budget first used far from the clock's origin opens its window there.
    for secs in [
        0u64,
        1,
        1 << 21,
        (1 << 21) + 1,
        1 << 22,
        40 * 86_400,
        u64::MAX / 1_000_000,
    ] {
        let budget = RetryBudget::percent(0).with_floor_per_sec(2);
        assert_eq!(
            drain(&budget, Instant::from_secs(secs)),
            2,
            "first used at {secs} s"
        );
    }
}

/// Several threads deposit and withdraw at the same instant, each emptying the budget every
/// few deposits so that withdrawals race for the last tokens; afterwards it is drained. The
/// grants during the race never exceed what the deposits and the one floor window allow, and
/// with the drain they add up to exactly that: nothing over-drawn, nothing lost.
#[test]
fn racing_threads_never_overdraw_and_lose_nothing() {
    const THREADS: u64 = 4;
    const OPS: u64 = 50_000;
    let floor = 7;
    for percent in [10, 100, 130] {
        let budget = RetryBudget::percent(percent)
            .with_floor_per_sec(floor)
            .with_max_balance(RetryBudget::MAX_BALANCE);
        let now = Instant::from_millis(42_250);
        let (deposits, granted) = race(THREADS, OPS, |t, i| {
            budget.deposit(now);
            // Every few deposits, take all there is: the threads race for the last tokens.
            let g = if (i + t) % (1 + t) == 0 {
                drain(&budget, now)
            } else {
                0
            };
            (1, g)
        });
        let allowed = bought(deposits, u64::from(percent) * 10) + u64::from(floor);
        assert!(
            granted <= allowed,
            "{percent}%: {granted} granted, {allowed} allowed"
        );
        assert_eq!(granted + drain(&budget, now), allowed, "{percent}%");
    }
}

/// The same race over many seconds, with each thread's instants out of step with the others'
/// (so the budget sees readings that go back and forth across window boundaries).
#[test]
fn racing_threads_across_windows_stay_within_the_bound() {
    const THREADS: u64 = 4;
    const OPS: u64 = 20_000;
    let percent = 5;
    let floor = 3;
    let budget = RetryBudget::percent(percent)
        .with_floor_per_sec(floor)
        .with_max_balance(RetryBudget::MAX_BALANCE);
    let instant = |t: u64, i: u64| Instant::from_micros(1_000_000 + i * 997 + t * 250_013);
    let (deposits, granted) = race(THREADS, OPS, |t, i| {
        let now = instant(t, i);
        let d = u64::from(i % 4 == 0);
        if d == 1 {
            budget.deposit(now);
        }
        (d, drain(&budget, now))
    });
    let first = instant(0, 0).as_micros() / 1_000_000;
    let last = instant(THREADS - 1, OPS - 1).as_micros() / 1_000_000;
    let allowed = bought(deposits, u64::from(percent) * 10) + u64::from(floor) * (last - first + 1);
    assert!(granted <= allowed, "{granted} granted, {allowed} allowed");
    // Every thread drained after every step, so the deposits were all spent.
    assert!(granted >= bought(deposits, u64::from(percent) * 10));
}
