//! [`Embassy`]: embassy as the core's [`Runtime`], the current deadline in a static behind
//! a critical section.

use core::cell::Cell;

use critical_section::Mutex;
use deadline_core::Deadline;
use deadline_core::runtime::Runtime;

use crate::clock::EmbassyTimer;
use crate::entropy::Entropy;

/// The current deadline.
static CURRENT: Mutex<Cell<Option<Deadline>>> = Mutex::new(Cell::new(None));

/// embassy as the core's [`Runtime`]: [`EmbassyTimer`], [`Entropy`] for the backoff's jitter
/// (seeded from the tick count at each draw; pass a hardware generator with `.rng(..)` where
/// there is one), and the current deadline in a static behind a critical section, set around
/// each poll of a scoped future.
///
/// The static is one per program: it is right for the futures of one executor (embassy's
/// thread-mode executor, or any single one). Run deadline-bounded calls on that executor
/// only: a future on an interrupt executor that preempts one of its polls reads that poll's
/// deadline as the current one, and every call and scope there takes the earlier of it and
/// its own (`.deadline(..)` included), so its calls may be cut short or refused, never
/// lengthened. Executors on two cores (an RP2040's) are worse: their polls overlap rather
/// than nest, each puts back what it found when its poll began, and a deadline one core
/// entered can be left in the static after both polls end, cutting short or refusing every
/// later call on both cores once it passes. Run deadline-bounded calls on one core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Embassy;

impl Runtime for Embassy {
    type Timer = EmbassyTimer;
    type Rng = Entropy;

    fn timer() -> EmbassyTimer {
        EmbassyTimer
    }

    fn rng() -> Entropy {
        Entropy
    }

    // One copy, as `replace_current` below: every scope and call reads it.
    #[inline(never)]
    fn current() -> Option<Deadline> {
        critical_section::with(|cs| CURRENT.borrow(cs).get())
    }

    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
        /// Puts the earlier deadline back, on return and on unwind.
        struct Restore(Option<Deadline>);
        impl Drop for Restore {
            fn drop(&mut self) {
                replace_current(self.0);
            }
        }
        let _restore = Restore(replace_current(Some(deadline)));
        f()
    }
}

/// Makes `deadline` the current one, returning the one it replaces.
///
/// One copy for the whole program: every poll of a scoped future enters its deadline and puts
/// the earlier one back, and a critical section inlined at each of them would repeat its code.
#[inline(never)]
fn replace_current(deadline: Option<Deadline>) -> Option<Deadline> {
    critical_section::with(|cs| CURRENT.borrow(cs).replace(deadline))
}
