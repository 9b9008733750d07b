//! A code-size probe: a binary that links every decision of `deadline-core` (the call
//! timeout, the plan, retry and hedge, every backoff jitter, the retry budget, the breaker,
//! admission, the statement timeout and the header codecs), each input and result passed
//! through `core::hint::black_box` so that nothing is folded away. It is built to be
//! measured (`scripts/core-size.sh`), not run. The driver (`drive`) is not in it: it is the
//! machine that sequences these decisions, measured by the firmware itself.

#![no_std]
#![no_main]

use core::hint::black_box;
use core::time::Duration;

use cortex_m_rt::entry;
use deadline_core::breaker::{BreakerConfig, BreakerOutcome, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, HedgeState, RetryState, call_timeout};
use deadline_core::plan::Plan;
use deadline_core::policy::{Backoff, HedgePolicy, Jitter};
use deadline_core::rng::SplitMix64;
use deadline_core::statement::{StatementPolicy, statement_timeout};
use deadline_core::wire::{Admission, QueueAdmission};
use deadline_core::wire::{DeadlineMs, GrpcTimeout, Propagation};
use deadline_core::wire::{parse_grpc_pushback, parse_retry_after};
use deadline_core::{Deadline, Instant, Outcome, Policy, ms};

static BACKOFF: Backoff = Backoff::exponential(ms(10))
    .with_max(ms(1_000))
    .with_jitter(Jitter::Full)
    .with_multiplier(8, 5);
static POLICY: Policy = Policy::required("A")
    .idempotent()
    .with_cap(ms(50))
    .with_floor(ms(10))
    .with_connect(ms(5))
    .with_retries(2)
    .with_backoff(BACKOFF)
    .with_hedge(HedgePolicy::new(ms(20), 1));
static OPTIONAL: Policy = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
static STATEMENT: StatementPolicy = StatementPolicy::capped(ms(300))
    .with_floor(ms(40))
    .with_reserve(ms(5));
static ADMISSION: QueueAdmission = Admission::new(ms(5)).with_max_queue_delay(ms(50));
static PROPAGATION: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));
static BUDGET: RetryBudget = RetryBudget::percent(10).with_floor_per_sec(10);
static BREAKER: CircuitBreaker = CircuitBreaker::new(BreakerConfig::DEFAULT);

/// A duration the optimiser cannot see through.
fn d(millis: u64) -> Duration {
    black_box(ms(millis))
}

/// An instant the optimiser cannot see through.
fn at(millis: u64) -> Instant {
    black_box(Instant::from_millis(millis))
}

#[entry]
fn main() -> ! {
    let jitters = [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
        Jitter::Grpc,
    ];
    // The configuration is static, as at a real call site; the optimiser sees it only through
    // `black_box`, so none of it is folded into the code.
    let policy: &Policy = black_box(&POLICY);
    let optional: &Policy = black_box(&OPTIONAL);
    let statement: &StatementPolicy = black_box(&STATEMENT);
    let admission: &QueueAdmission = black_box(&ADMISSION);
    let propagation: &Propagation = black_box(&PROPAGATION);
    let backoff: Backoff = *black_box(&BACKOFF);
    let mut rng = SplitMix64::new(black_box(7));
    loop {
        let now = at(10);
        let deadline = black_box(Deadline::after(at(0), d(200)));

        // The call timeout, and the plan's reserve and decision.
        keep(call_timeout(optional, deadline, d(20), now));
        let mut plan: Plan<'_, 4> = Plan::new(deadline, d(20));
        if let (Ok(a), Ok(c)) = (plan.then(policy), plan.then(optional)) {
            keep(plan.decide(black_box(a), now));
            keep(plan.decide(black_box(c), at(156)));
        }

        // Retry and hedge, through the call context with its budget and breaker.
        let call = Call::new(policy, deadline, d(20))
            .with_budget(black_box(&BUDGET))
            .with_breaker(black_box(&BREAKER));
        let mut retry = RetryState::new();
        keep(retry.decide(&call, black_box(Outcome::TimedOut), &mut rng, now));
        let mut hedge = HedgeState::new(now);
        keep(hedge.decide(&call, black_box(Some(ms(15))), at(40)));

        // Every backoff jitter, drawn.
        for jitter in jitters {
            let b = black_box(backoff.with_jitter(jitter));
            keep(b.delay(black_box(3), d(40), &mut rng));
            keep(b.bounds(black_box(3), d(40)));
        }

        // The shared protections.
        BUDGET.deposit(now);
        keep(BUDGET.try_withdraw(now));
        if let Ok(permit) = BREAKER.try_acquire(now) {
            BREAKER.record(permit, black_box(BreakerOutcome::Failure), at(20));
        }
        keep(BREAKER.state());
        keep(admission.admission().admit(deadline, now));
        keep(admission.admit_queued(deadline, at(1), now));
        keep(statement_timeout(statement, deadline, now));

        // The header codecs, both ways.
        keep(GrpcTimeout::from_duration(d(195)));
        keep(GrpcTimeout::parse(black_box(b"195m")));
        keep(DeadlineMs::from_duration(d(195)));
        keep(DeadlineMs::parse(black_box(b"195")));
        keep(propagation.encode_grpc_timeout(deadline, now));
        keep(propagation.encode_deadline_ms(deadline, now));
        keep(propagation.decode_grpc_timeout(black_box(b"195m"), now));
        keep(propagation.decode_deadline_ms(black_box(b"195"), now));
        keep(parse_retry_after(black_box(b"2")));
        keep(parse_grpc_pushback(black_box(b"150")));
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    cortex_m::asm::udf()
}

/// Keeps a result: the optimiser must assume it is read.
fn keep<T>(value: T) {
    let _ = black_box(value);
}
