//! [`block_on`]: the executor of the [`Blocking`](crate::Blocking) runtime. It runs one
//! future on the calling thread, parking the thread while the future waits, and wakes it for
//! the [`ThreadSleep`](crate::ThreadSleep)s polled inside at their instants: a scope's timer
//! waits beside its work instead of blocking the thread until the deadline.

use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Wake;
use std::thread::{self, Thread};

use deadline_core::{Clock, Instant};

use crate::clock::StdClock;

std::thread_local! {
    /// Whether this thread is running [`block_on`] (how deep, for one inside another).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The sleeps polled on this thread while they were pending: their instants and wakers.
    static SLEEPS: RefCell<Vec<(Instant, Waker)>> = const { RefCell::new(Vec::new()) };
}

/// Wakes the thread running [`block_on`]. The flag keeps the wake-up itself: a thread's
/// unpark token can be taken by anything that parks it, and code inside the future's poll may
/// (a `std::sync::mpsc` receive does), so a wake-up that came during the poll would otherwise
/// be lost, and `block_on` would sleep past it.
struct Unpark {
    thread: Thread,
    woken: AtomicBool,
}

impl Unpark {
    /// Whether the future was woken since the last call, clearing the flag.
    fn take(&self) -> bool {
        self.woken.swap(false, Ordering::Acquire)
    }
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Runs `future` to its end on this thread: polls it, and while it is pending parks the
/// thread until it is woken or the earliest sleep waiting inside it is due (whose waker is
/// then woken).
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    /// Leaves the executor on return and on unwind.
    struct Depth;
    impl Drop for Depth {
        fn drop(&mut self) {
            let depth = DEPTH.with(|d| {
                d.set(d.get().saturating_sub(1));
                d.get()
            });
            if depth == 0 {
                // What the future left behind (a scope's timer dropped with it) wakes nothing.
                SLEEPS.with(|s| s.borrow_mut().clear());
            }
        }
    }
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    let _depth = Depth;

    let unpark = Arc::new(Unpark {
        thread: thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(Arc::clone(&unpark));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        // Parks until woken or the earliest sleep is due; a park can also end for no reason
        // (or for an unpark meant for code in the poll), so the flag, not the park, says
        // whether the future was woken.
        loop {
            if unpark.take() {
                break;
            }
            match SLEEPS.with(|s| s.borrow().iter().map(|(at, _)| *at).min()) {
                None => thread::park(),
                Some(at) => {
                    let now = StdClock.now();
                    if at <= now {
                        wake_due(now);
                        break;
                    }
                    thread::park_timeout(at.saturating_duration_since(now));
                }
            }
        }
    }
}

/// Wakes and forgets every sleep due at `now`.
fn wake_due(now: Instant) {
    let due: Vec<Waker> = SLEEPS.with(|s| {
        let mut sleeps = s.borrow_mut();
        let mut due = Vec::new();
        sleeps.retain(|(at, waker)| {
            if *at <= now {
                due.push(waker.clone());
                false
            } else {
                true
            }
        });
        due
    });
    for waker in due {
        waker.wake();
    }
}

/// For a sleep until `at` that is pending: inside [`block_on`], keeps `waker` to be woken at
/// `at` and returns true; elsewhere returns false (nothing here would wake it).
pub(crate) fn wake_at(at: Instant, waker: &Waker) -> bool {
    if DEPTH.with(Cell::get) == 0 {
        return false;
    }
    SLEEPS.with(|s| {
        let mut sleeps = s.borrow_mut();
        if !sleeps
            .iter()
            .any(|(kept, w)| *kept == at && w.will_wake(waker))
        {
            sleeps.push((at, waker.clone()));
        }
    });
    true
}
