//! A request handler on tokio whose nested calls inherit the request's deadline.
//!
//! ```text
//! cargo run -p deadline-examples --bin nested
//! ```
//!
//! The handler sets the deadline once, when the request arrives ([`scope_timeout`]). Code
//! below it never takes a timeout parameter: the pricing call reads the deadline from the task
//! ([`call`], [`drive`]), each of its attempts runs under the attempt's own, shorter deadline,
//! and the database query inside it turns the time left into a statement timeout
//! ([`statement_timeout`]). A spawned task gets the deadline only through [`propagate`].

use std::convert::Infallible;
use std::time::Duration;

use deadline_core::retry::Outcome;
use deadline_core::rng::SplitMix64;
use deadline_core::statement::{StatementDecision, StatementPolicy};
use deadline_core::{Clock, Instant, Policy, ms};
use deadline_tokio::{
    TokioClock, call, drive, propagate, remaining, scope_timeout, statement_timeout,
};

/// Pricing: p50 30 ms, p99.9 90 ms, capped at 110 ms.
static PRICING: Policy = Policy::required("pricing", ms(110), ms(30));
/// Its database: at most 300 ms per query, none started with under 40 ms left (seed 002).
static ORDERS: StatementPolicy = StatementPolicy::new(ms(300), ms(40));

/// `d` in milliseconds, rounded to the nearest.
fn millis(d: Duration) -> u128 {
    (d.as_micros() + 500) / 1000
}

/// Milliseconds since `t0`, rounded to the nearest.
fn at(t0: Instant) -> u128 {
    millis(TokioClock.now().saturating_duration_since(t0))
}

/// The time left until the current deadline, in milliseconds.
fn left() -> u128 {
    millis(remaining().unwrap_or_default())
}

/// The pricing service's work: one database query under the time left.
async fn query_price(t0: Instant) -> Result<u32, Infallible> {
    println!("{:>4} ms  pricing attempt: {} ms left", at(t0), left());
    match statement_timeout(&ORDERS) {
        StatementDecision::Set(timeout) => println!("{:>4} ms  database: {timeout}", at(t0)),
        StatementDecision::DontStart(s) => {
            println!("{:>4} ms  database: not started ({})", at(t0), s.error())
        }
    }
    tokio::time::sleep(ms(30)).await; // the query
    Ok(42)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let t0 = TokioClock.now();
    // The request arrives with 200 ms; 20 ms are kept for our own work after pricing.
    scope_timeout(ms(200), async {
        println!("{:>4} ms  request: {} ms left", at(t0), left());
        tokio::time::sleep(ms(60)).await; // earlier work
        let price = drive(
            call(&PRICING, ms(20)),
            SplitMix64::new(1),
            |_: &Infallible| Outcome::Failed,
            |_limits| query_price(t0),
        )
        .await;
        println!("{:>4} ms  pricing answered: {:?}", at(t0), price.result);

        // Work handed to another task sees the deadline only when it is propagated.
        let audit = tokio::spawn(propagate(async { remaining() }));
        let left = audit.await.ok().flatten().unwrap_or_default();
        println!(
            "{:>4} ms  spawned audit task: {} ms left",
            at(t0),
            left.as_millis()
        );
    })
    .await;
}
