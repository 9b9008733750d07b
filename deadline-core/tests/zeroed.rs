//! The shared state a `Dependency` keeps starts as all zeros, so that a `static` holding it
//! needs no initial value copied from flash: a histogram or a set of counters made from zeroed
//! memory (what start-up code leaves in `.bss`) behaves exactly as a new one.

// Zeroed memory is built with `core::mem::zeroed`, the one way to make it.
#![allow(unsafe_code)]

use core::time::Duration;

use deadline_core::ms;
use deadline_core::observe::CompactHistogram;
use deadline_core::observe::{CounterEvent, Counters, Histogram, SmallHistogram};
use deadline_core::policy::Quantile;

/// Records the same latencies into both and checks that every reading agrees.
macro_rules! same_readings {
    ($fresh:expr, $zeroed:expr) => {{
        let (fresh, zeroed) = ($fresh, $zeroed);
        assert!(zeroed.is_empty() && fresh.is_empty());
        for (t, n) in [(3, 40), (12, 30), (20, 20), (90, 9), (900, 1)] {
            fresh.record_n(ms(t), n);
            zeroed.record_n(ms(t), n);
        }
        assert_eq!(zeroed.count(), 100);
        for q in [
            Quantile::MIN,
            Quantile::P50,
            Quantile::P95,
            Quantile::P999,
            Quantile::MAX,
        ] {
            assert_eq!(zeroed.quantile(q), fresh.quantile(q));
        }
        assert!(zeroed.buckets().eq(fresh.buckets()));
        assert_eq!((zeroed.min(), zeroed.max()), (fresh.min(), fresh.max()));
    }};
}

#[test]
fn a_zeroed_histogram_of_each_layout_is_a_new_one() {
    // SAFETY: a histogram is an array of atomic integers and nothing else; zero is a valid
    // value of each (an empty bucket).
    let zeroed: Histogram = unsafe { core::mem::zeroed() };
    same_readings!(Histogram::new(), zeroed);
    // SAFETY: as above.
    let zeroed: SmallHistogram = unsafe { core::mem::zeroed() };
    same_readings!(SmallHistogram::with_layout(), zeroed);
    // SAFETY: as above, with 16-bit atomic counters.
    let zeroed: CompactHistogram = unsafe { core::mem::zeroed() };
    same_readings!(CompactHistogram::with_layout(), zeroed);
}

#[test]
fn zeroed_counters_are_new_ones() {
    // SAFETY: counters are atomic integers and nothing else; zero is a valid value of each.
    let zeroed: Counters = unsafe { core::mem::zeroed() };
    let fresh = Counters::new();
    assert_eq!(zeroed.snapshot(), fresh.snapshot());
    for (i, event) in CounterEvent::ALL.into_iter().enumerate() {
        let n = u32::try_from(i).unwrap() + 1;
        zeroed.record_n(event, n);
        fresh.record_n(event, n);
    }
    assert_eq!(zeroed.snapshot(), fresh.snapshot());
    assert_eq!(zeroed.get(CounterEvent::BreakerRejection), 10);
}

#[test]
fn a_dependency_histogram_of_a_static_starts_empty() {
    use deadline_core::Dependency;
    use deadline_core::virtual_time::ManualRuntime;

    static D: Dependency<ManualRuntime> = Dependency::new(
        deadline_core::Policy::required("d")
            .idempotent()
            .with_hedge_at_p95(ms(50)),
    );
    assert!(D.latency().is_empty());
    assert_eq!(D.live_hedge_delay(), None);
    assert_eq!(D.counters().snapshot(), Counters::new().snapshot());
    D.record_latency(Duration::from_millis(7));
    assert_eq!(D.latency().count(), 1);
}
