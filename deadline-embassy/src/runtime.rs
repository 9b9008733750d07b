//! [`Embassy`]: embassy as the core's [`Runtime`], the current deadline in a static behind
//! a critical section.

use core::cell::Cell;

use critical_section::Mutex;
use deadline_core::Deadline;
use deadline_core::rng::SplitMix64;
use deadline_core::runtime::Runtime;

use crate::clock::EmbassyTimer;

/// The current deadline, and the count that seeds each call's jitter.
static STATE: Mutex<Cell<(Option<Deadline>, u64)>> = Mutex::new(Cell::new((None, 0)));

/// embassy as the core's [`Runtime`]: [`EmbassyTimer`], a [`SplitMix64`] per call seeded from
/// the tick count and a call counter (a microcontroller has no operating system to ask for
/// entropy; pass a hardware generator with `.rng(..)` where there is one), and the current
/// deadline in a static behind a critical section, set around each poll of a scoped future.
///
/// The static is one per program: it is right for the futures of one executor (embassy's
/// thread-mode executor, or any single one). A future on an interrupt executor that preempts
/// a poll of another would see that poll's deadline: give such calls their deadline with
/// `.deadline(..)` instead of a scope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Embassy;

impl Runtime for Embassy {
    type Timer = EmbassyTimer;
    type Rng = SplitMix64;

    fn timer() -> EmbassyTimer {
        EmbassyTimer
    }

    fn rng() -> SplitMix64 {
        let count = critical_section::with(|cs| {
            let cell = STATE.borrow(cs);
            let (deadline, count) = cell.get();
            let count = count.wrapping_add(1);
            cell.set((deadline, count));
            count
        });
        let ticks = embassy_time::Instant::now().as_ticks();
        SplitMix64::new(ticks ^ count.rotate_left(32))
    }

    fn current() -> Option<Deadline> {
        critical_section::with(|cs| STATE.borrow(cs).get().0)
    }

    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
        /// Puts the earlier deadline back, on return and on unwind.
        struct Restore(Option<Deadline>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let earlier = self.0;
                critical_section::with(|cs| {
                    let cell = STATE.borrow(cs);
                    let (_, count) = cell.get();
                    cell.set((earlier, count));
                });
            }
        }
        let earlier = critical_section::with(|cs| {
            let cell = STATE.borrow(cs);
            let (earlier, count) = cell.get();
            cell.set((Some(deadline), count));
            earlier
        });
        let _restore = Restore(earlier);
        f()
    }
}
