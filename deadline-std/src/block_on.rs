//! [`block_on`]: the executor of the [`Blocking`](crate::Blocking) runtime. It runs one
//! future on the calling thread, parking the thread while the future waits, and wakes it for
//! the [`ThreadSleep`](crate::ThreadSleep)s polled inside at their instants: a scope's timer
//! waits beside its work instead of blocking the thread until the deadline.

use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Wake;
use std::thread::{self, Thread};

use deadline_core::{Clock, Instant};

use crate::clock::StdClock;

std::thread_local! {
    /// Whether this thread is running [`block_on`] (how deep, for one inside another).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The sleeps polled on this thread while they were pending, until they are due or
    /// dropped: their numbers, instants and wakers.
    static SLEEPS: RefCell<Vec<(u64, Instant, Waker)>> = const { RefCell::new(Vec::new()) };
}

/// The number the next sleep kept is given: one count for the process, so that a sleep
/// moved to another thread's `block_on` is never taken for one kept there.
static NEXT: AtomicU64 = AtomicU64::new(0);

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
                // Taken out before it is dropped: a waker dropped may drop a sleep, which
                // forgets itself in `SLEEPS`.
                let left = SLEEPS.with(|s| core::mem::take(&mut *s.borrow_mut()));
                drop(left);
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
            match SLEEPS.with(|s| s.borrow().iter().map(|(_, at, _)| *at).min()) {
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
        sleeps.retain(|(_, at, waker)| {
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
/// `at` and returns the number it is kept under (`kept`, the number it was kept under when
/// it was polled before, if it still is: its waker is replaced); elsewhere returns `None`
/// (nothing here would wake it).
pub(crate) fn wake_at(at: Instant, waker: &Waker, kept: Option<u64>) -> Option<u64> {
    if DEPTH.with(Cell::get) == 0 {
        return None;
    }
    // A waker replaced is dropped after the borrow ends: dropping it may drop a sleep.
    let (id, replaced) = SLEEPS.with(|s| {
        let mut sleeps = s.borrow_mut();
        if let Some(entry) = kept.and_then(|id| sleeps.iter_mut().find(|(n, ..)| *n == id)) {
            let replaced = (!entry.2.will_wake(waker))
                .then(|| core::mem::replace(&mut entry.2, waker.clone()));
            return (entry.0, replaced);
        }
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        sleeps.push((id, at, waker.clone()));
        (id, None)
    });
    drop(replaced);
    Some(id)
}

/// Forgets the sleep kept under `id` ([`wake_at`]): it was dropped before it was due, and
/// wakes nothing.
pub(crate) fn forget(id: u64) {
    // `try_with`: a sleep dropped while the thread's locals are being torn down has nothing
    // left to forget. The waker is dropped after the borrow ends: dropping it may drop
    // another sleep, which forgets itself in turn.
    let forgotten = SLEEPS
        .try_with(|s| {
            let mut sleeps = s.borrow_mut();
            let at = sleeps.iter().position(|(n, ..)| *n == id)?;
            Some(sleeps.swap_remove(at))
        })
        .ok()
        .flatten();
    drop(forgotten);
}

#[cfg(test)]
mod tests {
    use core::future::{Future, poll_fn};
    use core::pin::Pin;
    use core::task::Poll;

    use deadline_core::{Clock, Timer, ms};

    use super::{SLEEPS, block_on};
    use crate::{StdClock, ThreadSleep, ThreadTimer};

    /// How many sleeps `block_on` keeps to wake.
    fn kept() -> usize {
        SLEEPS.with(|s| s.borrow().len())
    }

    /// Polls `sleep` once, where it must be pending.
    async fn poll_pending(sleep: &mut ThreadSleep) {
        poll_fn(|cx| {
            assert!(Pin::new(&mut *sleep).poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
    }

    /// A sleep polled pending inside `block_on` is kept to be woken once, however often it is
    /// polled, and forgotten when it is dropped before it is due: a scope whose work answered
    /// first leaves nothing behind to wake the future for nothing (a worker looping over
    /// requests inside one `block_on` kept one per call until its instant, each scanned at
    /// every new sleep). Its instant is a minute away: nothing here waits for it.
    #[test]
    fn a_sleep_dropped_before_it_is_due_is_forgotten() {
        block_on(async {
            let far = StdClock.now() + ms(60_000);
            let mut sleep = ThreadTimer.sleep_until(far);
            let mut other = ThreadTimer.sleep_until(far);
            for _ in 0..3 {
                poll_pending(&mut sleep).await;
            }
            assert_eq!(kept(), 1, "one wake-up, however often it was polled");
            poll_pending(&mut other).await;
            assert_eq!(kept(), 2, "another sleep until the same instant is its own");
            drop(sleep);
            assert_eq!(kept(), 1, "the other is still woken");
            drop(other);
            assert_eq!(kept(), 0);
        });
    }

    /// A sleep polled inside one thread's `block_on`, then moved to another thread's, is
    /// kept there as its own: never taken for a sleep that thread keeps under the same number
    /// (each thread counted from 0, so the moved sleep took over the other's wake-up, and
    /// dropping either forgot both).
    #[test]
    fn a_sleep_moved_to_another_thread_is_kept_as_its_own() {
        let far = StdClock.now() + ms(60_000);
        let mut moved = ThreadTimer.sleep_until(far);
        block_on(poll_pending(&mut moved));
        std::thread::spawn(move || {
            block_on(async {
                let mut own = ThreadTimer.sleep_until(far);
                poll_pending(&mut own).await;
                poll_pending(&mut moved).await;
                assert_eq!(kept(), 2, "two sleeps, two wake-ups");
                drop(moved);
                assert_eq!(kept(), 1, "the thread's own is still woken");
                drop(own);
            });
        })
        .join()
        .unwrap();
    }
}
