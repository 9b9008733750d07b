//! No heap allocation per call with the advice on: a dependency whose adaptive cap is
//! checked every `ADVICE_EVERY` latencies (and moves), counted with a counting global
//! allocator over calls that cross several checks. (With feature `metrics` each call sends
//! its labels to the facade, which allocates: then only that is shown.)
#![allow(unsafe_code, reason = "a global allocator is an unsafe trait")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use deadline_core::runtime::scope_timeout;
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::{Clock, Dependency, Policy, Timer, ms};

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn note() {
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

static ADAPTIVE: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("adaptive")
        .with_cap(ms(50))
        .with_slice(ms(40))
        .with_adaptive_cap(ms(20), ms(200)),
);

/// `calls` calls of 10 ms, one in ten of 80 ms (over the cap until it moves).
async fn calls(calls: u64) {
    for n in 0..calls {
        let latency = if n % 10 == 0 { ms(80) } else { ms(10) };
        let _ = scope_timeout::<ManualRuntime, _>(ms(1_000), async {
            ADAPTIVE
                .run(|_| async move {
                    let t = ManualRuntime::timer();
                    t.sleep_until(t.now() + latency).await;
                    Ok::<_, ()>(())
                })
                .await
        })
        .await;
    }
}

#[test]
fn no_allocation_per_call_with_the_advice_on() {
    let every = u64::from(Dependency::<ManualRuntime>::ADVICE_EVERY);
    let count = ManualRuntime::block_on(async {
        // The warm-up: the clock's and the runtime's one-time costs.
        calls(20).await;
        COUNT.with(|c| c.set(0));
        ON.with(|on| on.set(true));
        calls(4 * every).await;
        ON.with(|on| on.set(false));
        COUNT.with(Cell::get)
    })
    .unwrap();
    // The checks ran: the cap moved off the policy's 50 ms.
    assert_ne!(ADAPTIVE.cap(), ms(50));
    if Dependency::<ManualRuntime>::PUBLISHES_METRICS {
        assert!(count >= 4 * every, "{count} allocations");
    } else {
        assert_eq!(count, 0, "allocations over {} calls", 4 * every);
    }
}
