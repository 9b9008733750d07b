//! The checkout example, to the millisecond: one 200 ms deadline, A then B then C (optional), 20 ms of
//! our own work, each call's timeout computed from the time left when it starts.

use core::time::Duration;

use deadline_core::call::Decision;
use deadline_core::plan::Plan;
use deadline_core::virtual_time::ManualClock;
use deadline_core::{Clock, Deadline, Instant, Policy, ms};

// The example's table: caps from p99.9 plus some extra time (C's below its p99.9, because it has
// a fallback), floors at the p50.
const A: Policy = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
const B: Policy = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
const C: Policy = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
const BUDGET: Duration = ms(200);
const OWN_WORK: Duration = ms(20);

/// One step as it happened: when it started, the decision, and when it ended.
#[derive(Debug, PartialEq)]
struct Step {
    name: &'static str,
    start: Instant,
    decision: Decision,
}

/// Runs the chain with the given latencies (a call that is made takes its latency; a skipped
/// call takes no time) and returns the steps and the instant the response goes out.
fn run(latencies: [Duration; 3]) -> (Vec<Step>, Instant) {
    let clock = ManualClock::new();
    let deadline = Deadline::after(clock.now(), BUDGET);
    let mut plan: Plan<'_, 3> = Plan::new(deadline, OWN_WORK);
    let ids = [plan.then(&A), plan.then(&B), plan.then(&C)].map(Result::unwrap);
    let mut steps = Vec::new();
    for (id, latency) in ids.into_iter().zip(latencies) {
        let start = clock.now();
        let decision = plan.decide(id, start);
        if let Decision::Call(limits) = decision {
            assert!(
                latency <= limits.timeout(),
                "the example's calls answer in time"
            );
            clock.advance(latency);
        }
        steps.push(Step {
            name: plan.policy(id).unwrap().name(),
            start,
            decision,
        });
    }
    clock.advance(OWN_WORK);
    (steps, clock.now())
}

#[test]
fn fast_case_a_50_b_110_c_60_response_at_160() {
    let (steps, respond) = run([ms(10), ms(105), ms(25)]);
    let got: Vec<_> = steps
        .iter()
        .map(|s| (s.name, s.start.as_millis(), s.decision.timeout()))
        .collect();
    assert_eq!(
        got,
        [
            ("A", 0, Some(ms(50))),
            ("B", 10, Some(ms(110))),
            ("C", 115, Some(ms(60))),
        ]
    );
    assert_eq!(respond, Instant::from_millis(160));
}

#[test]
fn slow_case_c_gets_24_under_its_25_floor_and_is_skipped_response_at_176() {
    let (steps, respond) = run([ms(48), ms(108), ms(25)]);
    assert_eq!(steps[0].decision.timeout(), Some(ms(50)));
    assert_eq!(steps[1].start, Instant::from_millis(48));
    assert_eq!(steps[1].decision.timeout(), Some(ms(110)));
    assert_eq!(steps[2].start, Instant::from_millis(156));
    match steps[2].decision {
        Decision::Skip(shortfall) => {
            assert_eq!(shortfall.available(), ms(24));
            assert_eq!(shortfall.floor(), ms(25));
        }
        other => panic!("C should be skipped, got {other:?}"),
    }
    assert_eq!(respond, Instant::from_millis(176));
}

#[test]
fn reserves_follow_the_formula() {
    let deadline = Deadline::after(Instant::ZERO, BUDGET);
    let mut plan: Plan<'_, 3> = Plan::new(deadline, OWN_WORK);
    let [a, b, c] = [plan.then(&A), plan.then(&B), plan.then(&C)].map(Result::unwrap);
    // A reserves our work and B's floor; C is optional and reserves nothing.
    assert_eq!(plan.reserve(a), ms(50));
    assert_eq!(plan.reserve(b), ms(20));
    assert_eq!(plan.reserve(c), ms(20));
}

#[test]
fn the_fixed_split_fails_where_the_deadline_succeeds() {
    // A fixed split gives B 100 ms; B needs 105 ms. From the time left, B gets 110.
    let fixed_b = ms(100);
    let (steps, _) = run([ms(10), ms(105), ms(25)]);
    let b = steps[1].decision.timeout().unwrap();
    assert!(ms(105) > fixed_b && ms(105) <= b);
    // The caps add up to more than the budget, which no fixed split can give.
    assert!(A.cap() + B.cap() + C.cap() + OWN_WORK > BUDGET);
}

#[test]
fn a_required_call_under_its_floor_fails_instead_of_skipping() {
    let deadline = Deadline::after(Instant::ZERO, BUDGET);
    let mut plan: Plan<'_, 3> = Plan::new(deadline, OWN_WORK);
    let b = plan.then(&B).unwrap();
    // At 160 ms, 200 - 160 - 20 = 20 ms < B's 30 ms floor.
    match plan.decide(b, Instant::from_millis(160)) {
        Decision::Fail(s) => {
            assert_eq!(s.available(), ms(20));
            assert_eq!(s.error().http_status(), 504);
        }
        other => panic!("B should fail at once, got {other:?}"),
    }
}

#[test]
fn parallel_steps_share_the_wall_clock() {
    // Parallel dependencies share the wall clock, so each is sized from the same
    // time left, and later steps reserve the largest floor among them once.
    let x = Policy::required("X").with_cap(ms(300)).with_floor(ms(100));
    let y = Policy::required("Y").with_cap(ms(300)).with_floor(ms(40));
    let z = Policy::required("Z").with_cap(ms(300)).with_floor(ms(60));
    let deadline = Deadline::after(Instant::ZERO, ms(1000));
    let mut plan: Plan<'_, 4> = Plan::new(deadline, ms(50));
    let first = plan.then(&z).unwrap();
    let px = plan.then(&x).unwrap();
    let py = plan.alongside(&y).unwrap();
    assert!(plan.parallel(px, py));
    assert_eq!(plan.reserve(first), ms(50) + ms(100));
    let now = Instant::from_millis(200);
    assert_eq!(
        plan.decide(px, now).timeout(),
        plan.decide(py, now).timeout()
    );
}
