//! Retry storms on virtual time: what a dependency that always fails receives.
//!
//! - One layer: 10,000 requests, each allowed 3 attempts, against a dependency that fails
//!   every call. With the retry budget the dependency receives at most
//!   `R + floor(R x 10%) + floor x (seconds spanned + 1)` calls: about 1.1 per request.
//! - Three services, client -> A -> B -> C, where C always fails and A and B each allow 3
//!   attempts: the calls C receives per request, with the library (a budget at each layer)
//!   and without it (plain retry loops, and the driver with no budget): 9 without, about
//!   1.1 x 1.1 with.
//!
//! Every figure printed is counted, not computed: run with `--nocapture` to see them.
#![cfg(feature = "drive")]

use std::cell::Cell;
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, Limits};
use deadline_core::drive::Driver;
use deadline_core::policy::Backoff;
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Clock, Deadline, Outcome, Policy, Timer, ms};

const REQUESTS: u64 = 10_000;
/// One request arrives every millisecond: 10,000 requests span 10 s.
const SPACING: Duration = ms(1);
const BUDGET: Duration = ms(500);
/// Three attempts: two retries, 2 ms apart.
const ATTEMPTS: u32 = 3;
const DEP: Policy = Policy::required("dep")
    .idempotent()
    .with_cap(ms(100))
    .with_floor(ms(1))
    .with_retries(ATTEMPTS - 1)
    .with_backoff(Backoff::constant(ms(2)));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unavailable;

fn failed(_: &Unavailable) -> Outcome {
    Outcome::Failed
}

/// A dependency that fails every call after 1 ms, counting them.
async fn always_fails(timer: &ManualTimer, calls: &Cell<u64>) -> Result<(), Unavailable> {
    calls.set(calls.get() + 1);
    timer.sleep_until(timer.now() + ms(1)).await;
    Err(Unavailable)
}

/// The most calls the retry budget allows for `requests` original calls over `span`:
/// the module docs of `throttle` give it.
fn budget_bound(requests: u64, budget: &RetryBudget, span: Duration) -> u64 {
    let ratio = u64::from(budget.ratio_per_mille());
    let floor = u64::from(budget.floor_per_sec());
    requests + requests * ratio / 1000 + floor * (span.as_secs() + 1)
}

/// 10,000 requests against a dependency that always fails, each allowed 3 attempts, through
/// the driver with the default retry budget (10%, a floor of 10 per second).
#[test]
#[cfg_attr(
    miri,
    ignore = "a 30,000-call simulation: the driver's own tests cover it under miri"
)]
fn one_layer_calls_per_request_stay_within_the_budget() {
    let timer = ManualTimer::new();
    let budget = RetryBudget::default();
    let calls = Cell::new(0);
    let mut rng = SplitMix64::new(7);
    let t0 = timer.now();
    let mut failures = 0;
    for i in 0..REQUESTS {
        let arrival = t0 + SPACING * u32::try_from(i).unwrap();
        if timer.now() < arrival {
            timer.clock().set(arrival);
        }
        let deadline = Deadline::after(timer.now(), BUDGET);
        let call = Call::new(&DEP, deadline, Duration::ZERO).with_budget(&budget);
        let called = timer
            .run(Driver::new(call, &timer, &mut rng).run(failed, |_| always_fails(&timer, &calls)))
            .expect("the call completes on virtual time");
        assert!(matches!(
            called.result,
            Err(CallError::Attempt(Unavailable))
        ));
        assert!(called.report.ended <= deadline.instant());
        failures += 1;
    }
    let span = timer.now().saturating_duration_since(t0);
    let bound = budget_bound(REQUESTS, &budget, span);
    let per_request = calls.get() as f64 / REQUESTS as f64;
    println!(
        "storm, one layer: {REQUESTS} requests, {} calls ({per_request:.3} per request), \
         bound {bound} (1.1 x requests + floor {} x {} s); without the budget: up to {}",
        calls.get(),
        budget.floor_per_sec(),
        span.as_secs() + 1,
        REQUESTS * u64::from(ATTEMPTS)
    );
    assert_eq!(failures, REQUESTS);
    assert!(calls.get() >= REQUESTS, "every request calls at least once");
    assert!(
        calls.get() <= bound,
        "{} calls, over the bound {bound}",
        calls.get()
    );
    // And the bound is the issue's: at most 1.1 x requests plus the floor.
    assert!(
        calls.get() as f64
            <= 1.1 * REQUESTS as f64
                + f64::from(budget.floor_per_sec()) * (span.as_secs() + 1) as f64
    );
}

/// How the services of the three-layer chain retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A plain loop of 3 attempts at every layer, no budget, no deadline (what many services
    /// do by hand).
    Loops,
    /// The library's driver at every layer, with no retry budget (the attempt cap only).
    DriverNoBudget,
    /// The library's driver at every layer with a retry budget (10%, floor 10/s) per
    /// dependency.
    DriverWithBudget,
}

/// One request through client -> A -> B -> C, C failing every call; returns nothing, counts
/// C's calls in `c_calls` and B's in `b_calls`.
struct Chain<'t> {
    timer: &'t ManualTimer,
    mode: Mode,
    a_budget: RetryBudget,
    b_budget: RetryBudget,
    b_calls: Cell<u64>,
    c_calls: Cell<u64>,
}

impl<'t> Chain<'t> {
    fn new(timer: &'t ManualTimer, mode: Mode) -> Self {
        Chain {
            timer,
            mode,
            a_budget: RetryBudget::default(),
            b_budget: RetryBudget::default(),
            b_calls: Cell::new(0),
            c_calls: Cell::new(0),
        }
    }

    /// Service B: calls C (which fails), retrying as the mode says.
    async fn b(&self, deadline: Deadline) -> Result<(), Unavailable> {
        self.b_calls.set(self.b_calls.get() + 1);
        match self.mode {
            Mode::Loops => {
                for _ in 0..ATTEMPTS {
                    if always_fails(self.timer, &self.c_calls).await.is_ok() {
                        return Ok(());
                    }
                }
                Err(Unavailable)
            }
            Mode::DriverNoBudget | Mode::DriverWithBudget => {
                let mut call = Call::new(&DEP, deadline, Duration::ZERO);
                if self.mode == Mode::DriverWithBudget {
                    call = call.with_budget(&self.b_budget);
                }
                Driver::new(call, self.timer, SplitMix64::new(self.c_calls.get()))
                    .run(failed, |_| always_fails(self.timer, &self.c_calls))
                    .await
                    .result
                    .map_err(|_| Unavailable)
            }
        }
    }

    /// Service A: calls B, retrying as the mode says.
    async fn a(&self, deadline: Deadline) -> Result<(), Unavailable> {
        match self.mode {
            Mode::Loops => {
                for _ in 0..ATTEMPTS {
                    if self.b(deadline).await.is_ok() {
                        return Ok(());
                    }
                }
                Err(Unavailable)
            }
            Mode::DriverNoBudget | Mode::DriverWithBudget => {
                let mut call = Call::new(&DEP, deadline, Duration::ZERO);
                if self.mode == Mode::DriverWithBudget {
                    call = call.with_budget(&self.a_budget);
                }
                Driver::new(call, self.timer, SplitMix64::new(self.b_calls.get()))
                    .run(failed, |limits: Limits| self.b(limits.deadline()))
                    .await
                    .result
                    .map_err(|_| Unavailable)
            }
        }
    }
}

/// Runs 10,000 requests through the chain in `mode`; returns (B's calls, C's calls, span).
fn run_chain(mode: Mode) -> (u64, u64, Duration, RetryBudget) {
    let timer = ManualTimer::new();
    let chain = Chain::new(&timer, mode);
    let t0 = timer.now();
    for i in 0..REQUESTS {
        let arrival = t0 + SPACING * u32::try_from(i).unwrap();
        if timer.now() < arrival {
            timer.clock().set(arrival);
        }
        let deadline = Deadline::after(timer.now(), BUDGET);
        let answer = timer
            .run(chain.a(deadline))
            .expect("completes on virtual time");
        assert_eq!(answer, Err(Unavailable));
    }
    let span = timer.now().saturating_duration_since(t0);
    (
        chain.b_calls.get(),
        chain.c_calls.get(),
        span,
        RetryBudget::default(),
    )
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a 230,000-call simulation: the driver's own tests cover it under miri"
)]
fn three_layers_amplification_with_and_without_the_library() {
    let mut per_request = Vec::new();
    for mode in [Mode::Loops, Mode::DriverNoBudget, Mode::DriverWithBudget] {
        let (b, c, span, budget) = run_chain(mode);
        let ratio = c as f64 / REQUESTS as f64;
        println!(
            "storm, three layers, {mode:?}: {REQUESTS} requests -> B {b} calls, C {c} calls \
             ({ratio:.3} per request at the bottom) over {} ms",
            span.as_millis()
        );
        per_request.push((mode, b, c, span, budget));
    }
    let attempts = u64::from(ATTEMPTS);
    for (mode, b, c, span, budget) in per_request {
        match mode {
            // Retrying at every layer multiplies: 3 x 3 = 9 calls at the bottom per request.
            Mode::Loops | Mode::DriverNoBudget => {
                assert_eq!(b, REQUESTS * attempts, "{mode:?}");
                assert_eq!(c, REQUESTS * attempts * attempts, "{mode:?}");
            }
            // Each layer's budget bounds what it adds: B's calls by A's budget, C's by B's.
            Mode::DriverWithBudget => {
                let b_bound = budget_bound(REQUESTS, &budget, span);
                let c_bound = budget_bound(b, &budget, span);
                assert!(
                    b >= REQUESTS && b <= b_bound,
                    "B: {b} calls, bound {b_bound}"
                );
                assert!(c >= b && c <= c_bound, "C: {c} calls, bound {c_bound}");
                assert!(
                    c * 10 < REQUESTS * attempts * attempts * 2,
                    "C: {c} calls is not bounded"
                );
            }
        }
    }
}
