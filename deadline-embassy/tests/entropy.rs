//! `Entropy`, embassy's default random source: draws at one instant still differ, and a
//! jittered wait drawn from it stays in its range and spreads over it.

use deadline_core::ms;
use deadline_core::policy::Backoff;
use deadline_core::rng::Rng;
use deadline_core::runtime::Runtime;
use deadline_embassy::{Embassy, Entropy};

/// The runtime hands out the zero-sized handle: a call carries no generator.
#[test]
fn the_runtime_s_source_is_zero_sized() {
    let rng: Entropy = Embassy::rng();
    assert_eq!(core::mem::size_of_val(&rng), 0);
}

/// The clock does not move between these draws (nothing advances the mock driver here):
/// the count of draws alone must tell them apart.
#[test]
fn draws_at_one_instant_differ() {
    let mut draws: Vec<u64> = (0..1_000).map(|_| Entropy.next_u64()).collect();
    draws.sort_unstable();
    draws.dedup();
    assert_eq!(draws.len(), 1_000, "a repeated draw");
}

/// Full jitter over a 10 ms ceiling: every wait in [0, 10 ms], and the waits spread over
/// the range (each tenth of it hit in 2 000 draws; a source stuck on one value fails).
#[test]
fn full_jitter_from_it_spans_its_range() {
    let backoff = Backoff::exponential(ms(10)).with_max(ms(10));
    let mut tenths = [0u32; 10];
    for _ in 0..2_000 {
        let wait = backoff.delay(0, ms(0), &mut Entropy);
        assert!(wait <= ms(10), "{wait:?} past the ceiling");
        let tenth = (wait.as_micros() / 1_000).min(9) as usize;
        tenths[tenth] += 1;
    }
    assert!(tenths.iter().all(|&n| n > 0), "{tenths:?}");
}
