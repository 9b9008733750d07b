//! The std clock: one origin per process, instants taken before the first use convert too.

use std::time::Duration;

use deadline_core::{Clock, Instant};
use deadline_std::{StdClock, checked_to_std, from_std, to_std};

#[test]
fn instants_round_trip_to_the_microsecond() {
    let now = std::time::Instant::now();
    let core = from_std(now);
    assert!(to_std(core) <= now);
    assert!(now - to_std(core) < Duration::from_micros(1));
    let later = core + Duration::from_millis(160);
    assert_eq!(from_std(to_std(later)), later);
}

#[test]
fn an_instant_before_the_origin_saturates_and_never_panics() {
    // The origin lies one day before the first use: ten days back is before it.
    if let Some(long_ago) = std::time::Instant::now().checked_sub(Duration::from_secs(864_000)) {
        assert_eq!(from_std(long_ago), Instant::ZERO);
    }
    // The furthest instant gives an instant in the future (itself where the platform can
    // represent it, a stand-in 30 years ahead where not), never a panic.
    assert!(to_std(Instant::MAX) > std::time::Instant::now());
    assert_eq!(
        checked_to_std(Instant::ZERO).map(from_std),
        Some(Instant::ZERO)
    );
}

#[test]
fn the_clock_is_monotonic_and_matches_the_conversion() {
    let before = from_std(std::time::Instant::now());
    let a = StdClock.now();
    let b = StdClock.now();
    let after = from_std(std::time::Instant::now());
    assert!(before <= a && a <= b && b <= after);
}
