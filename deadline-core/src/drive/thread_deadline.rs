//! [`ThreadDeadline`]: the current deadline in a thread-local (feature `std`), for runtimes
//! on std threads.

use core::cell::Cell;

use super::runtime::Onward;
use crate::deadline::Deadline;

std::thread_local! {
    static CURRENT: Cell<Option<Deadline>> = const { Cell::new(None) };
    static SENT: Cell<Option<Onward>> = const { Cell::new(None) };
}

/// The current deadline kept in a thread-local, set only while a scoped future is polled (or
/// a scoped closure runs): the [`Runtime::current`](super::Runtime::current) and
/// [`Runtime::enter`](super::Runtime::enter) of a runtime on std threads (async-std, smol,
/// plain threads). Because it is set around each poll and put back after it, the deadline
/// follows its future across the threads of a work-stealing executor. It also keeps what an
/// attempt sent onward ([`note_sent`](Self::note_sent)), for the driver to take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ThreadDeadline;

impl ThreadDeadline {
    /// The deadline set on this thread, if any.
    #[must_use]
    #[inline]
    pub fn current() -> Option<Deadline> {
        CURRENT.with(Cell::get)
    }

    /// Runs `f` with `deadline` set on this thread, and puts back what was there when `f`
    /// returns or unwinds.
    #[inline]
    pub fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
        /// Puts the earlier value back, on return and on unwind.
        struct Restore(Option<Deadline>);
        impl Drop for Restore {
            #[inline]
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CURRENT.with(|c| c.replace(Some(deadline))));
        f()
    }

    /// Keeps `onward` on this thread, with what was kept already ([`Onward::and`]):
    /// [`KeepsSent::note_sent`](super::runtime::KeepsSent::note_sent).
    #[inline]
    pub fn note_sent(onward: Onward) {
        SENT.with(|s| s.set(Some(s.get().map_or(onward, |kept| kept.and(onward)))));
    }

    /// [`enter`](Self::enter), returning what was given to [`note_sent`](Self::note_sent)
    /// on this thread while `f` ran:
    /// [`Runtime::enter_attempt`](super::Runtime::enter_attempt). What was kept before is
    /// put back after, so an attempt made inside another attempt's poll takes only its own.
    #[inline]
    pub fn enter_attempt<R>(deadline: Deadline, f: impl FnOnce() -> R) -> (R, Option<Onward>) {
        Self::enter(deadline, || {
            let before = SENT.with(Cell::take);
            let r = f();
            (r, SENT.with(|s| s.replace(before)))
        })
    }
}
