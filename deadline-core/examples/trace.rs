//! The checkout example's two traces, decided by the core over a manual clock. It exits
//! non-zero when a trace ends otherwise than the worked example says (the response at 160 ms
//! with every call made; in the slow case, C skipped and the response at 176 ms).
//!
//! ```text
//! cargo run -p deadline-core --example trace
//! ```

use core::time::Duration;

use deadline_core::call::Decision;
use deadline_core::plan::Plan;
use deadline_core::virtual_time::ManualClock;
use deadline_core::{Clock, Deadline, Policy, ms};

const A: Policy = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
const B: Policy = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
const C: Policy = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));

/// Prints one trace: the calls as the plan decides them, each answering after its latency (at
/// most its timeout). When the response goes out (ms), and the optional calls skipped; or
/// `None` when the request failed.
fn trace(title: &str, latencies: [Duration; 3]) -> Option<(u64, Vec<&'static str>)> {
    let mut skipped = Vec::new();
    println!("{title}");
    let clock = ManualClock::new();
    let deadline = Deadline::after(clock.now(), ms(200));
    let mut plan: Plan<'_, 3> = Plan::new(deadline, ms(20));
    let steps = [&A, &B, &C].map(|p| plan.then(p).expect("three steps fit a plan of three"));
    for (step, latency) in steps.into_iter().zip(latencies) {
        let now = clock.now();
        let policy = plan.policy(step).expect("the step was just added");
        let left = deadline.remaining(now).as_millis();
        let reserve = plan.reserve(step).as_millis();
        match plan.decide(step, now) {
            Decision::Call(limits) => {
                let took = latency.min(limits.timeout());
                clock.advance(took);
                println!(
                    "  {:>4} ms  {}  left {left:>3} ms, reserve {reserve:>2} ms -> timeout {:>3} ms; answered in {} ms",
                    now.as_millis(),
                    policy.name(),
                    limits.timeout().as_millis(),
                    took.as_millis(),
                );
            }
            Decision::Skip(s) => {
                skipped.push(policy.name());
                println!(
                    "  {:>4} ms  {}  left {left:>3} ms, reserve {reserve:>2} ms -> {} ms < floor {} ms: skipped, fallback used",
                    now.as_millis(),
                    policy.name(),
                    s.available().as_millis(),
                    s.floor().as_millis(),
                );
            }
            Decision::Fail(s) => {
                println!(
                    "  {:>4} ms  {}  {} ms < floor {} ms: request fails now ({})",
                    now.as_millis(),
                    policy.name(),
                    s.available().as_millis(),
                    s.floor().as_millis(),
                    s.error(),
                );
                return None;
            }
        }
    }
    clock.advance(plan.own_work());
    println!("  {:>4} ms  response goes out\n", clock.now().as_millis());
    Some((clock.now().as_millis(), skipped))
}

fn main() {
    println!(
        "deadline 200 ms; own work 20 ms; A cap 50 floor 10, B cap 110 floor 30, C cap 60 floor 25 (optional)\n"
    );
    let usual = trace(
        "A answers in 10 ms, B in 105, C in 25:",
        [ms(10), ms(105), ms(25)],
    );
    let slow = trace(
        "slow case: A answers in 48 ms, B in 108:",
        [ms(48), ms(108), ms(25)],
    );
    if usual != Some((160, vec![])) || slow != Some((176, vec!["C"])) {
        eprintln!(
            "trace: not the worked example: {usual:?} (expected the response at 160 ms, \
             nothing skipped), {slow:?} (expected 176 ms, C skipped)"
        );
        std::process::exit(1);
    }
}
