//! The worst case of a call that backs off between attempts: the rule "(r + 1) × T plus the
//! wait times", decorrelated jitter's growth, saturation, and a check against the core's own
//! retry decisions with every draw at the top of its range.

use core::time::Duration;

use deadline_core::analysis::{EXACT_RETRIES, worst_case, worst_case_with_backoff};
use deadline_core::call::{Call, RetryDecision, RetryState};
use deadline_core::policy::{Backoff, Jitter, RetryPolicy};
use deadline_core::rng::{Rng, Sequence, SplitMix64};
use deadline_core::{Deadline, Instant, Outcome, Policy, ms};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// Runs a call whose every attempt times out under `retry`, with the core's retry decisions
/// and no deadline, and returns how long it took from the first attempt's start.
fn all_attempts_time_out<R: Rng>(t: Duration, retry: RetryPolicy, rng: &mut R) -> Duration {
    let policy = Policy::required("X")
        .idempotent()
        .with_cap(t)
        .with_floor(Duration::ZERO)
        .with_retries(retry.attempts() - 1)
        .with_backoff(retry.backoff());
    let call = Call::new(&policy, Deadline::NEVER, Duration::ZERO);
    let mut state = RetryState::new();
    let mut now = Instant::ZERO;
    loop {
        now = now + t;
        match state.decide(&call, Outcome::TimedOut, rng, now) {
            RetryDecision::Retry(retry) => now = retry.at,
            RetryDecision::GiveUp(_) => return now - Instant::ZERO,
        }
    }
}

/// Every draw at the top of its range: the longest backoff each time.
fn longest_draws() -> Sequence<'static> {
    Sequence::new(&[u32::MAX])
}

#[test]
fn three_tries_of_2_s_are_6_s_plus_the_wait_times() {
    // The budget table's retry waits 200 ms; exponential without jitter doubles it for the next one.
    let backoff = Backoff::exponential(ms(200))
        .with_max(ms(1_000))
        .with_jitter(Jitter::None);
    let retry = RetryPolicy::new(3, backoff);
    let without_waits = worst_case(ms(2_000), 2);
    assert_eq!(without_waits, ms(6_000));
    let waits = backoff.ceiling(0) + backoff.ceiling(1);
    assert_eq!(waits, ms(200 + 400));
    let with_waits = worst_case_with_backoff(ms(2_000), &retry);
    assert_eq!(with_waits, without_waits + waits);
    // The core's own retry decisions take exactly that long when every attempt times out.
    assert_eq!(
        all_attempts_time_out(ms(2_000), retry, &mut longest_draws()),
        with_waits
    );
}

#[test]
fn full_jitter_counts_the_top_of_each_range() {
    // One retry after a jittered backoff from 5 ms: the wait may be the whole 5 ms.
    let retry = RetryPolicy::new(
        2,
        Backoff::exponential(ms(5))
            .with_max(ms(40))
            .with_jitter(Jitter::Full),
    );
    assert_eq!(worst_case_with_backoff(ms(80), &retry), ms(160 + 5));
    // Drawn low, the same call takes less: the worst case is an upper bound.
    let low = all_attempts_time_out(ms(80), retry, &mut Sequence::new(&[0]));
    assert_eq!(low, worst_case(ms(80), 1));
}

#[test]
fn no_backoff_is_the_plain_worst_case() {
    for attempts in [0, 1, 2, 5] {
        let retry = RetryPolicy::new(attempts, Backoff::NONE);
        let retries = retry.attempts() - 1;
        assert_eq!(
            worst_case_with_backoff(ms(90), &retry),
            worst_case(ms(90), retries)
        );
    }
    assert_eq!(
        worst_case_with_backoff(ms(90), &RetryPolicy::new(1, Backoff::NONE)),
        ms(90)
    );
}

#[test]
fn decorrelated_jitter_grows_threefold_from_its_largest_previous_wait() {
    let (base, max) = (ms(10), ms(1_000));
    let backoff = Backoff::exponential(base)
        .with_max(max)
        .with_jitter(Jitter::Decorrelated);
    for attempts in 1..=9u32 {
        let retry = RetryPolicy::new(attempts, backoff);
        // The oracle: the largest wait before retry n is min(max, base × 3^(n+1)).
        let mut expected = worst_case(ms(50), attempts - 1);
        let mut grow = base;
        for _ in 1..attempts {
            grow = (grow * 3).min(max);
            expected += grow;
        }
        assert_eq!(
            worst_case_with_backoff(ms(50), &retry),
            expected,
            "{attempts}"
        );
        assert_eq!(
            all_attempts_time_out(ms(50), retry, &mut longest_draws()),
            expected,
            "{attempts}"
        );
    }
}

#[test]
fn huge_inputs_saturate() {
    let long = Backoff::exponential(Duration::MAX)
        .with_max(Duration::MAX)
        .with_jitter(Jitter::Full);
    let retry = RetryPolicy::new(u32::MAX, long);
    assert_eq!(
        worst_case_with_backoff(Duration::MAX, &retry),
        Duration::MAX
    );
    assert_eq!(worst_case_with_backoff(ms(1), &retry), Duration::MAX);
    let no_wait = RetryPolicy::new(u32::MAX, Backoff::NONE);
    assert_eq!(
        worst_case_with_backoff(Duration::MAX, &no_wait),
        Duration::MAX
    );
    // gRPC's jitter may exceed its max by 20%: still no overflow.
    let grpc = RetryPolicy::new(
        u32::MAX,
        Backoff::grpc(Duration::MAX).with_max(Duration::MAX),
    );
    assert_eq!(worst_case_with_backoff(ms(1), &grpc), Duration::MAX);
}

#[test]
fn the_most_attempts_are_summed_exactly_when_the_wait_settles() {
    // A constant wait: every retry waits 5 ms, however many there are.
    let retry = RetryPolicy::new(u32::MAX, Backoff::constant(ms(5)));
    let retries = u128::from(u32::MAX - 1);
    let expected = ms(10).as_nanos() * (retries + 1) + ms(5).as_nanos() * retries;
    assert_eq!(worst_case_with_backoff(ms(10), &retry).as_nanos(), expected);
    // Doubling reaches its max after a few retries; from then on every wait is the max.
    let backoff = Backoff::exponential(ms(1))
        .with_max(ms(64))
        .with_jitter(Jitter::Equal);
    let retry = RetryPolicy::new(u32::MAX, backoff);
    let growing: u128 = (0..6).map(|n| ms(1 << n).as_nanos()).sum();
    let expected = ms(10).as_nanos() * (retries + 1) + growing + ms(64).as_nanos() * (retries - 6);
    assert_eq!(worst_case_with_backoff(ms(10), &retry).as_nanos(), expected);
}

#[test]
fn a_backoff_still_growing_past_the_exact_retries_is_bounded_by_its_max() {
    // A growth factor barely over one: the ceiling creeps up for far more retries than the
    // sum works out one by one. The answer lies between every wait at the base and every
    // wait at the max.
    let (base, max) = (ms(1), ms(1_000));
    let backoff = Backoff::exponential(base)
        .with_max(max)
        .with_jitter(Jitter::None)
        .with_multiplier(1_000_001, 1_000_000);
    let attempts = EXACT_RETRIES * 4;
    let retry = RetryPolicy::new(attempts, backoff);
    let retries = attempts - 1;
    let got = worst_case_with_backoff(ms(10), &retry);
    let plain = worst_case(ms(10), retries);
    assert!(got >= plain + base * retries, "{got:?}");
    assert!(got <= plain + max * retries, "{got:?}");
    // Within the exact retries the sum is the ceilings', one by one.
    let retry = RetryPolicy::new(EXACT_RETRIES + 1, backoff);
    let exact: Duration = (0..EXACT_RETRIES).map(|n| backoff.ceiling(n)).sum();
    assert_eq!(
        worst_case_with_backoff(ms(10), &retry),
        worst_case(ms(10), EXACT_RETRIES) + exact
    );
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
        Just(Jitter::Grpc),
    ]
}

/// Backoffs of up to ten seconds with any jitter and a growth factor from 1 to 4.
fn backoff() -> impl Strategy<Value = Backoff> {
    (
        0u64..2_000_000,
        0u64..10_000_000,
        jitter(),
        1u32..40,
        1u32..10,
    )
        .prop_map(|(base, max, jitter, num, den)| {
            let (num, den) = if num < den { (den, den) } else { (num, den) };
            Backoff::exponential(Duration::from_micros(base))
                .with_max(Duration::from_micros(max))
                .with_jitter(jitter)
                .with_multiplier(num.min(den * 4), den)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: RngSeed::Fixed(0x0b0c_0ff5),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_worst_case_is_what_the_retry_decisions_take_at_their_longest(
        backoff in backoff(),
        attempts in 0u32..12,
        t in (1u64..5_000_000).prop_map(Duration::from_micros),
        seed in any::<u64>(),
    ) {
        let retry = RetryPolicy::new(attempts, backoff);
        let worst = worst_case_with_backoff(t, &retry);
        prop_assert!(worst >= worst_case(t, retry.attempts() - 1));
        // Every draw at the top of its range reaches it exactly.
        prop_assert_eq!(all_attempts_time_out(t, retry, &mut longest_draws()), worst);
        // Random draws never pass it.
        let mut rng = SplitMix64::new(seed);
        prop_assert!(all_attempts_time_out(t, retry, &mut rng) <= worst);
        // One more attempt never makes the worst case shorter.
        let more = RetryPolicy::new(retry.attempts() + 1, backoff);
        prop_assert!(worst_case_with_backoff(t, &more) >= worst + t);
    }

    #[test]
    fn any_input_gives_an_answer_without_panicking(
        base in any::<u64>().prop_map(Duration::from_nanos),
        max in prop_oneof![any::<u64>().prop_map(Duration::from_nanos), Just(Duration::MAX)],
        jitter in jitter(),
        num in any::<u32>(),
        den in any::<u32>(),
        attempts in prop_oneof![0u32..100, Just(u32::MAX)],
        t in prop_oneof![any::<u64>().prop_map(Duration::from_nanos), Just(Duration::MAX)],
    ) {
        let backoff = Backoff::exponential(base).with_max(max).with_jitter(jitter).with_multiplier(num, den);
        let retry = RetryPolicy::new(attempts, backoff);
        let worst = worst_case_with_backoff(t, &retry);
        prop_assert!(worst >= worst_case(t, retry.attempts() - 1));
    }
}
