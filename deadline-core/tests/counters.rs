//! Per-dependency counters: each event lands in its own field, rates, deltas, concurrency.

use deadline_core::observe::{CounterEvent, CounterSnapshot, Counters};

#[test]
fn each_event_counts_in_its_own_field_only() {
    for (i, event) in CounterEvent::ALL.into_iter().enumerate() {
        let c = Counters::new();
        let n = u32::try_from(i).unwrap() + 1;
        c.record_n(event, n);
        let s = c.snapshot();
        for other in CounterEvent::ALL {
            let expected = if other == event { u64::from(n) } else { 0 };
            assert_eq!(s.get(other), expected, "{event:?} leaked into {other:?}");
            assert_eq!(c.get(other), expected);
        }
    }
}

#[test]
fn event_names_are_unique_snake_case() {
    let names = CounterEvent::ALL.map(CounterEvent::name);
    for (i, a) in names.iter().enumerate() {
        assert!(
            a.chars().all(|ch| ch.is_ascii_lowercase() || ch == '_'),
            "{a}"
        );
        assert!(names[i + 1..].iter().all(|b| a != b), "{a} twice");
    }
    // The snapshot's Debug output names its fields the same way.
    let debug = format!("{:?}", Counters::new().snapshot());
    for name in names {
        assert!(
            debug.contains(&format!("{name}: 0")),
            "{name} not in {debug}"
        );
    }
}

#[test]
fn rates_are_zero_without_calls() {
    let s = Counters::new().snapshot();
    assert_eq!(s, CounterSnapshot::default());
    assert_eq!(s.deadline_exceeded_rate(), 0.0);
    assert_eq!(s.success_rate(), 0.0);
    assert_eq!(s.timeout_rate(), 0.0);
    assert_eq!(s.skip_rate(), 0.0);
    assert_eq!(s.amplification(), 0.0);
    assert_eq!(s.hedge_win_rate(), 0.0);
    assert_eq!(s.breaker_rejection_rate(), 0.0);
}

#[test]
fn rates_divide_by_the_right_counter() {
    let c = Counters::new();
    c.record_n(CounterEvent::Call, 200);
    c.record_n(CounterEvent::Success, 180);
    c.record_n(CounterEvent::DeadlineExceeded, 10);
    c.record_n(CounterEvent::Skipped, 4);
    c.record_n(CounterEvent::Retry, 12);
    c.record_n(CounterEvent::Hedge, 8);
    c.record_n(CounterEvent::HedgeWin, 2);
    c.record_n(CounterEvent::Timeout, 22);
    c.record_n(CounterEvent::BreakerRejection, 6);
    let s = c.snapshot();
    assert_eq!(s.attempts(), 200 + 12 + 8);
    assert_eq!(s.deadline_exceeded_rate(), 10.0 / 200.0);
    assert_eq!(s.success_rate(), 180.0 / 200.0);
    assert_eq!(s.skip_rate(), 4.0 / 200.0);
    assert_eq!(s.timeout_rate(), 22.0 / 220.0);
    assert_eq!(s.amplification(), 20.0 / 200.0);
    assert_eq!(s.hedge_win_rate(), 2.0 / 8.0);
    assert_eq!(s.breaker_rejection_rate(), 6.0 / 200.0);
}

#[test]
fn since_gives_the_interval() {
    let c = Counters::new();
    c.record_n(CounterEvent::Call, 100);
    c.record_n(CounterEvent::DeadlineExceeded, 1);
    let before = c.snapshot();
    c.record_n(CounterEvent::Call, 50);
    c.record_n(CounterEvent::DeadlineExceeded, 5);
    let delta = c.snapshot().since(&before);
    assert_eq!(delta.calls, 50);
    assert_eq!(delta.deadline_exceeded, 5);
    assert_eq!(delta.deadline_exceeded_rate(), 0.1);
    assert_eq!(delta.successes, 0);
}

#[test]
fn counters_can_be_static_and_shared_by_threads() {
    static DEP: Counters = Counters::new();
    let threads = 8u64;
    let per_thread = 10_000u64;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for i in 0..per_thread {
                    DEP.record(CounterEvent::Call);
                    if i % 10 == 0 {
                        DEP.record(CounterEvent::DeadlineExceeded);
                    } else {
                        DEP.record(CounterEvent::Success);
                    }
                }
            });
        }
    });
    let s = DEP.snapshot();
    assert_eq!(s.calls, threads * per_thread);
    assert_eq!(s.deadline_exceeded, threads * per_thread / 10);
    assert_eq!(s.successes + s.deadline_exceeded, s.calls);
}
