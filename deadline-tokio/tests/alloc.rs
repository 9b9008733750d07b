//! No heap allocation per call on the tokio path, shown with a counting global allocator.
//!
//! What is counted: every `alloc`, `alloc_zeroed` and `realloc` made *on the test's thread*
//! while counting is on. The runtime is tokio's current-thread runtime with paused time, so
//! the request futures, the core's driver, the attempts, tokio's timer wheel and its driver
//! all run on that thread; other threads (the test harness's) are not counted. Counting is on
//! for `CALLS` calls made after a warm-up, so one-time costs (the runtime's lazily grown
//! structures, the clock origin, the task-local's slot) are excluded.
#![allow(unsafe_code, reason = "a global allocator is an unsafe trait")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use deadline_core::policy::{Backoff, HedgePolicy};
use deadline_core::rng::SplitMix64;
use deadline_core::{Outcome, Policy, ms};
use deadline_tokio::low_level::{call, drive};
use deadline_tokio::{Dependency, scope_timeout};

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the allocator may run while the thread's locals are being torn down.
    if ON.try_with(Cell::get).unwrap_or(false) {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the same arguments; counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as for `alloc`; `ptr` and `layout` come from this allocator, i.e. `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, i.e. `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Calls measured after the warm-up.
const CALLS: u64 = 500;
/// Calls made before counting starts.
const WARM_UP: u64 = 20;

/// Allocations counted on this thread while `f` runs `CALLS` times after `WARM_UP` runs.
async fn allocations_per_calls<F, Fut>(mut f: F) -> u64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..WARM_UP {
        f().await;
    }
    COUNT.with(|c| c.set(0));
    ON.with(|on| on.set(true));
    for _ in 0..CALLS {
        f().await;
    }
    ON.with(|on| on.set(false));
    COUNT.with(Cell::get)
}

static PLAIN: Policy = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
static HEDGED: Policy = Policy::required("B")
    .idempotent()
    .with_cap(ms(150))
    .with_floor(ms(30))
    .with_hedge(HedgePolicy::new(ms(20), 1));
static RETRIED: Policy = Policy::required("B")
    .idempotent()
    .with_cap(ms(40))
    .with_floor(ms(10))
    .with_retries(1)
    .with_backoff(Backoff::constant(ms(10)));

/// One request: a deadline scope and one driven call whose attempts take `latency` each
/// (`slow` for the first attempt).
async fn request(policy: &'static Policy<'static>, first: u64, then: u64) {
    scope_timeout(ms(200), async {
        let mut n = 0;
        let called = drive(
            call(policy, ms(20)),
            SplitMix64::new(1),
            |_| Outcome::Failed,
            |_| {
                let latency = if n == 0 { first } else { then };
                n += 1;
                async move {
                    tokio::time::sleep(ms(latency)).await;
                    Ok::<_, ()>(())
                }
            },
        )
        .await;
        assert!(called.result.is_ok());
    })
    .await
    .expect("answered inside the scope");
}

#[tokio::test(start_paused = true)]
async fn no_allocation_per_call_on_the_tokio_path() {
    // A call answered in 30 ms: one attempt, its timeout timer and its latency timer.
    let plain = allocations_per_calls(|| request(&PLAIN, 30, 30)).await;
    // A hedged call: the first attempt (140 ms) loses to the hedge sent at 20 ms, and is
    // dropped.
    let hedged = allocations_per_calls(|| request(&HEDGED, 140, 10)).await;
    // A retried call: the first attempt hangs and times out at 40 ms, the retry answers.
    let retried = allocations_per_calls(|| request(&RETRIED, 1_000, 5)).await;
    assert_eq!(
        (plain, hedged, retried),
        (0, 0, 0),
        "allocations over {CALLS} calls (plain, hedged, retried)"
    );
}

/// The same three kinds of call, each a `Dependency` with its budget, counters and live
/// histogram, called in one line with the default classifier and random source.
static PLAIN_DEP: Dependency = Dependency::new(PLAIN);
static HEDGED_DEP: Dependency = Dependency::new(HEDGED);
static RETRIED_DEP: Dependency = Dependency::new(RETRIED);
static LIVE_DEP: Dependency = Dependency::new(
    Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(30))
        .with_hedge_at_p95(ms(20)),
);

/// One request calling `dep` in one line; attempts take `first`, then `then` milliseconds.
async fn one_line(dep: &'static Dependency, first: u64, then: u64) {
    // The default retry budget (10%, and 10 a second) refuses some retries and hedges of
    // these back-to-back calls: refused or not, a call allocates nothing.
    scope_timeout(ms(200), async {
        let mut n = 0;
        let answer = dep
            .run(|_| {
                let latency = if n == 0 { first } else { then };
                n += 1;
                async move {
                    tokio::time::sleep(ms(latency)).await;
                    Ok::<_, ()>(())
                }
            })
            .reserve(ms(20))
            .await;
        std::hint::black_box(answer).ok();
    })
    .await
    .expect("answered inside the scope");
}

#[tokio::test(start_paused = true)]
async fn no_allocation_per_one_line_call() {
    let plain = allocations_per_calls(|| one_line(&PLAIN_DEP, 30, 30)).await;
    let hedged = allocations_per_calls(|| one_line(&HEDGED_DEP, 140, 10)).await;
    let retried = allocations_per_calls(|| one_line(&RETRIED_DEP, 1_000, 5)).await;
    // The hedge delay read from the live histogram at each call's start.
    let live = allocations_per_calls(|| one_line(&LIVE_DEP, 140, 10)).await;
    if Dependency::PUBLISHES_METRICS {
        // deadline-core's `metrics` feature is on (a build that unifies it in): each call
        // sends its labels to the facade, which allocates.
        assert!(plain >= CALLS, "{plain} allocations over {CALLS} calls");
    } else {
        assert_eq!(
            (plain, hedged, retried, live),
            (0, 0, 0, 0),
            "allocations over {CALLS} calls (plain, hedged, retried, live hedge)"
        );
    }
    // The calls were recorded: the counters and the histogram saw every one.
    let calls = WARM_UP + CALLS;
    assert_eq!(PLAIN_DEP.counters().snapshot().calls, calls);
    assert_eq!(PLAIN_DEP.counters().snapshot().successes, calls);
    let hedged = HEDGED_DEP.counters().snapshot();
    // Every call hedged, or was refused at least once (a refused hedge is asked for again
    // after another delay).
    assert!(hedged.hedges > 0 && hedged.hedges < calls, "{hedged:?}");
    assert!(
        hedged.budget_refusals >= calls - hedged.hedges,
        "{hedged:?}"
    );
    let retried = RETRIED_DEP.counters().snapshot();
    assert_eq!(retried.retries + retried.budget_refusals, calls);
    assert!(LIVE_DEP.live_hedge_delay().is_some());
}

#[tokio::test(start_paused = true)]
async fn the_counter_sees_allocations() {
    // The instrument works: a boxed value per call is counted once per call.
    let boxed = allocations_per_calls(|| async {
        std::hint::black_box(Box::new(1u64));
    })
    .await;
    assert_eq!(boxed, CALLS);
}
