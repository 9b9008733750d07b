//! A request handler on tokio whose nested calls inherit the request's deadline, and whose
//! call to the next service hands it the time left in a header.
//!
//! ```text
//! cargo run -p deadline-examples --bin nested
//! ```
//!
//! The handler sets the deadline once, when the request arrives ([`scope_timeout`]). Code
//! below it never takes a timeout parameter: the pricing call reads the deadline from the task
//! ([`call`], [`drive`]) and its attempt runs under the attempt's own, shorter deadline. The
//! attempt sends what is left of it, less the network's share, in an `x-deadline-ms` header
//! ([`Propagation`]) to the pricing service, simulated as a task of its own that knows the
//! deadline only from that header. The service turns the header back into a deadline
//! ([`scope`]) and its database query into a statement timeout ([`decide_statement`]),
//! which bounds the query. A spawned task gets the deadline only through [`propagate`].

use std::time::Duration;

use deadline_core::statement::{StatementDecision, StatementPolicy};
use deadline_core::wire::{Propagation, X_DEADLINE_MS};
use deadline_core::{Clock, Deadline, Instant, Outcome, Policy, ms};
use deadline_tokio::low_level::{call, decide_statement, drive};
use deadline_tokio::time::TokioClock;
use deadline_tokio::{Entropy, current, propagate, remaining, scope, scope_timeout};

/// Pricing: p50 30 ms, p99.9 90 ms, capped at 110 ms.
static PRICING: Policy = Policy::required("pricing")
    .with_cap(ms(110))
    .with_floor(ms(30));
/// The hop to the pricing service: 5 ms kept for the network; the service accepts at most
/// 10 s from a caller.
static HOP: Propagation = Propagation::DEFAULT
    .with_allowance(ms(5))
    .with_max(ms(10_000));
/// Its database: at most 300 ms per query, none started with under 40 ms left.
static ORDERS: StatementPolicy = StatementPolicy::capped(ms(300)).with_floor(ms(40));

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

/// One pricing attempt: the request to the pricing service, with the time left in its header.
async fn ask_pricing(t0: Instant) -> Result<u32, String> {
    println!("{:>4} ms  pricing attempt: {} ms left", at(t0), left());
    let header = HOP
        .encode_deadline_ms(current().unwrap_or(Deadline::NEVER), TokioClock.now())
        .map_err(|e| e.to_string())?;
    println!("{:>4} ms  sent {X_DEADLINE_MS}: {header}", at(t0));
    // The service runs apart: it inherits nothing from this task, only the header's text.
    tokio::spawn(pricing_service(t0, header.to_string()))
        .await
        .map_err(|e| e.to_string())?
}

/// The pricing service: its deadline from the header, then one database query under it.
async fn pricing_service(t0: Instant, header: String) -> Result<u32, String> {
    let deadline = HOP
        .decode_deadline_ms(header.as_bytes(), TokioClock.now())
        .map_err(|e| e.to_string())?;
    scope(deadline, async move {
        println!("{:>4} ms  pricing service: {} ms left", at(t0), left());
        match decide_statement(&ORDERS) {
            StatementDecision::Set(timeout) => {
                println!("{:>4} ms  database: {timeout}", at(t0));
                let query = async {
                    tokio::time::sleep(ms(30)).await; // the query
                    42
                };
                tokio::time::timeout(timeout.as_duration(), query)
                    .await
                    .map_err(|_| format!("query cancelled by its {timeout}"))
            }
            StatementDecision::DontStart(s) => Err(format!("query not started: {}", s.error())),
        }
    })
    .await
    .map_err(|cut| cut.to_string())?
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
            Entropy,
            |_| Outcome::Failed,
            |_limits| ask_pricing(t0),
        )
        .await;
        println!("{:>4} ms  pricing answered: {:?}", at(t0), price.result);
        if price.result != Ok(42) {
            eprintln!("nested: the pricing call did not answer 42 within its deadline");
            std::process::exit(1);
        }

        // Work handed to another task sees the deadline only when it is propagated.
        let audit = tokio::spawn(propagate(async { remaining() }));
        let left = audit.await.ok().flatten().unwrap_or_default();
        println!(
            "{:>4} ms  spawned audit task: {} ms left",
            at(t0),
            left.as_millis()
        );
        if left.is_zero() {
            eprintln!("nested: the spawned task did not see the request's deadline");
            std::process::exit(1);
        }
    })
    .await
    .expect("inside its scope");
}
