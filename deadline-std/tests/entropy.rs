//! The default random source: different draws for every call and every thread.
//!
//! These tests cannot fail by chance in any way that matters:
//!
//! - On one thread, every `Entropy` value draws from the thread's one SplitMix64 stream.
//!   SplitMix64 steps its state by an odd constant (a full period of 2^64) and its output is
//!   a bijection of the state, so no two of its first 2^64 outputs are equal: the second
//!   value's 64 draws differ from the first's, always.
//! - Across threads, each thread's seed comes from std's `RandomState`, keyed from the
//!   operating system's randomness: two threads' 64-draw streams overlap only if their seeds
//!   are within 128 steps of each other, a chance of about 2^-56 for one pair of threads, and
//!   of about 2^-53 for the test's four threads (six pairs).
//! - 64 first backoffs drawn uniformly from 100,001 microsecond values are all equal with a
//!   chance of 100,001^-63.

use std::collections::HashSet;
use std::time::Duration;

use deadline_core::ms;
use deadline_core::policy::{Backoff, Jitter};
use deadline_core::rng::{Rng, SplitMix64};
use deadline_std::Entropy;

fn draws(mut rng: impl Rng) -> Vec<u64> {
    (0..64).map(|_| rng.next_u64()).collect()
}

#[test]
fn two_fresh_sources_on_one_thread_draw_differently() {
    let a = draws(Entropy);
    let b = draws(Entropy);
    assert_ne!(a, b);
    // Not one value repeats: they are consecutive outputs of one full-period stream.
    let all: HashSet<u64> = a.iter().chain(&b).copied().collect();
    assert_eq!(all.len(), 128);
}

#[test]
fn threads_draw_from_their_own_seeds() {
    let streams: Vec<Vec<u64>> = (0..4)
        .map(|_| std::thread::spawn(|| draws(Entropy)))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let all: HashSet<u64> = streams.iter().flatten().copied().collect();
    assert_eq!(all.len(), 4 * 64);
}

#[test]
fn seeds_differ_at_every_call() {
    let seeds: HashSet<u64> = (0..64).map(|_| Entropy::seed()).collect();
    assert_eq!(seeds.len(), 64);
}

#[test]
fn the_first_retry_of_two_calls_waits_differently() {
    // The storm jitter prevents: with a fixed seed every request's first backoff is the same.
    let backoff = Backoff::exponential(ms(100))
        .with_max(ms(1_000))
        .with_jitter(Jitter::Full);
    let mut waits: Vec<Duration> = (0..64)
        .map(|_| backoff.delay(0, Duration::ZERO, &mut Entropy))
        .collect();
    waits.sort();
    waits.dedup();
    assert!(
        waits.len() > 1,
        "every call drew the same jitter: {waits:?}"
    );
    // What a fixed seed per call gives instead: one wait for everyone.
    let mut seeded: Vec<Duration> = (0..64)
        .map(|_| backoff.delay(0, Duration::ZERO, &mut SplitMix64::new(1)))
        .collect();
    seeded.dedup();
    assert_eq!(seeded.len(), 1);
}
