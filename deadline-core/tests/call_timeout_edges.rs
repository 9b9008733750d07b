//! `call_timeout` against a reference written in `u128` microseconds, on a grid of edges:
//! durations of zero, one nanosecond, just under and over a microsecond and a second, whole
//! and fractional seconds, `u64::MAX` microseconds and seconds and `Duration::MAX`, for the
//! reserve, the cap, the floor and the connect limit; deadlines from none left to
//! `Instant::MAX`; clocks before the start, at it and after the deadline.
//!
//! The core's time is whole microseconds: a cap and a connect limit round down to one, a
//! floor and a reserve up, so that every guarantee holds for the durations as given.

use std::time::Duration;

use deadline_core::call::{Decision, call_timeout};
use deadline_core::policy::Necessity;
use deadline_core::{Deadline, Instant, Policy};

/// `d` in whole microseconds, rounded down, at most `u64::MAX`.
fn down(d: Duration) -> u128 {
    (d.as_nanos() / 1_000).min(u128::from(u64::MAX))
}

/// `d` in whole microseconds, rounded up, at most `u64::MAX`.
fn up(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1_000).min(u128::from(u64::MAX))
}

fn micros(us: u128) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap())
}

/// Checks one decision against the reference (a `Decision` cannot be built outside the
/// crate, so its fields are compared), and the guarantees `call_timeout` states against the
/// durations as given.
fn check(policy: &Policy, deadline: Deadline, reserve: Duration, now: Instant) {
    let left = down(deadline.remaining(now));
    let (cap, floor) = (down(policy.cap()), up(policy.floor()));
    let available = left.saturating_sub(up(reserve)).min(cap);
    let decision = call_timeout(policy, deadline, reserve, now);
    let context = || format!("{policy:?} {deadline:?} reserve {reserve:?} now {now:?}");
    if available == 0 || available < floor {
        match decision {
            Decision::Skip(s) | Decision::Fail(s) => {
                assert_eq!(s.left(), micros(left), "{}", context());
                assert_eq!(s.available(), micros(available), "{}", context());
                assert_eq!(s.floor(), micros(floor), "{}", context());
                assert_eq!(
                    matches!(decision, Decision::Fail(_)),
                    policy.necessity() == Necessity::Required,
                    "{}",
                    context()
                );
            }
            Decision::Call(l) => panic!("called with {l:?}: {}", context()),
        }
    } else {
        let Decision::Call(l) = decision else {
            panic!("not called ({decision:?}): {}", context());
        };
        assert_eq!(l.timeout(), micros(available), "{}", context());
        let connect = down(policy.connect()).min(available);
        assert_eq!(l.connect(), micros(connect), "{}", context());
        assert_eq!(
            l.until(),
            now.saturating_add(micros(available)),
            "{}",
            context()
        );
        // The guarantees, for the durations as given.
        let timeout = l.timeout();
        assert!(timeout > Duration::ZERO, "{}", context());
        assert!(timeout <= policy.cap(), "{}", context());
        assert!(timeout >= policy.floor(), "{}", context());
        assert!(
            timeout + reserve <= deadline.remaining(now),
            "{}",
            context()
        );
        assert!(l.connect() <= timeout, "{}", context());
        assert!(l.until() <= deadline.instant(), "{}", context());
    }
}

/// The policy keeps whole microseconds: its cap and connect limit rounded down, its floor
/// up; a cap or connect limit of `u64::MAX` microseconds or more is none (`Duration::MAX`).
fn check_rounding(policy: &Policy, cap: Duration, floor: Duration, connect: Duration) {
    let unbounded = |us: u128| {
        if us == u128::from(u64::MAX) {
            Duration::MAX
        } else {
            micros(us)
        }
    };
    assert_eq!(policy.cap(), unbounded(down(cap)), "cap {cap:?}");
    assert_eq!(policy.floor(), micros(up(floor)), "floor {floor:?}");
    assert_eq!(
        policy.connect(),
        unbounded(down(connect)),
        "connect {connect:?}"
    );
    let none_or_at_most = |kept: Duration, given: Duration| kept <= given || kept == Duration::MAX;
    assert!(none_or_at_most(policy.cap(), cap));
    assert!(none_or_at_most(policy.connect(), connect));
    assert!(policy.floor() >= floor || up(floor) == u128::from(u64::MAX));
}

fn durations() -> Vec<Duration> {
    let mut v = vec![
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_nanos(999),
        Duration::from_nanos(1_000),
        Duration::from_nanos(1_001),
        Duration::from_nanos(1_999),
        Duration::from_micros(25),
        Duration::from_nanos(999_999_999),
        Duration::from_secs(1),
        Duration::new(1, 1),
        Duration::new(1, 500),
        Duration::from_millis(1_500),
        Duration::from_secs(3_600),
        Duration::from_micros(u64::MAX),
        Duration::from_micros(u64::MAX) + Duration::from_nanos(500),
        Duration::from_micros(u64::MAX - 1) + Duration::from_nanos(999),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
    ];
    v.extend([7u64, 1_000, 1_000_001].map(Duration::from_micros));
    v
}

#[test]
fn call_timeout_is_the_reference_on_every_edge() {
    let ds = durations();
    let instants = [
        0,
        1,
        999,
        1_000_000,
        3_600_000_000,
        u64::MAX / 2,
        u64::MAX - 1,
        u64::MAX,
    ];
    let mut checked = 0u64;
    for &start in &[0u64, 1_000_000, u64::MAX - 1] {
        for &budget in &[
            Duration::ZERO,
            Duration::from_micros(1),
            Duration::from_millis(200),
            Duration::from_micros(u64::MAX),
            Duration::MAX,
        ] {
            let deadline = Deadline::after(Instant::from_micros(start), budget);
            for &now in &instants {
                let now = Instant::from_micros(now);
                for &reserve in &ds {
                    for &cap in &ds {
                        for &floor in ds.iter().step_by(3) {
                            for &connect in ds.iter().step_by(4) {
                                for necessity in [Necessity::Required, Necessity::Optional] {
                                    let policy = Policy::required("edge")
                                        .with_cap(cap)
                                        .with_floor(floor)
                                        .with_connect(connect)
                                        .with_necessity(necessity);
                                    check_rounding(&policy, cap, floor, connect);
                                    check(&policy, deadline, reserve, now);
                                    checked += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 1_000_000, "{checked}");
}
