//! `call_timeout` against the earlier code, in `Duration` arithmetic from `core`, on a grid of
//! edges: durations of zero, one nanosecond, just under and over a microsecond and a second,
//! whole and fractional seconds, `u64::MAX` microseconds and seconds and `Duration::MAX`, for
//! the reserve, the cap, the floor and the connect limit; deadlines from none left to
//! `Instant::MAX`; clocks before the start, at it and after the deadline.

use std::time::Duration;

use deadline_core::{Deadline, Decision, Instant, Necessity, Policy, call_timeout};

/// Checks one decision against the earlier `call_timeout`, line for line, in `core`'s
/// `Duration` operations (a `Decision` cannot be built outside the crate, so its fields are
/// compared).
fn check(policy: &Policy, deadline: Deadline, reserve: Duration, now: Instant) {
    let left = deadline.remaining(now);
    let available = left.saturating_sub(reserve).min(policy.cap);
    let decision = call_timeout(policy, deadline, reserve, now);
    let context = || format!("{policy:?} {deadline:?} reserve {reserve:?} now {now:?}");
    if available.is_zero() || available < policy.floor {
        match decision {
            Decision::Skip(s) | Decision::Fail(s) => {
                assert_eq!(s.left, left, "{}", context());
                assert_eq!(s.available, available, "{}", context());
                assert_eq!(s.floor, policy.floor, "{}", context());
                assert_eq!(
                    matches!(decision, Decision::Fail(_)),
                    policy.necessity == Necessity::Required,
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
        assert_eq!(l.timeout, available, "{}", context());
        assert_eq!(l.connect, policy.connect.min(available), "{}", context());
        assert_eq!(l.until, now.saturating_add(available), "{}", context());
    }
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
fn call_timeout_is_the_earlier_code_on_every_edge() {
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
                                        .cap(cap)
                                        .floor(floor)
                                        .connect(connect)
                                        .necessity(necessity);
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
