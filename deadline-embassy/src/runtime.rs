//! [`Embassy`]: embassy as the core's [`Runtime`], the current deadline in a static behind
//! a critical section.

use core::cell::Cell;

use critical_section::Mutex;
use deadline_core::Deadline;
use deadline_core::rng::SplitMix64;
use deadline_core::runtime::Runtime;

use crate::clock::EmbassyTimer;

/// The current deadline.
static CURRENT: Mutex<Cell<Option<Deadline>>> = Mutex::new(Cell::new(None));
/// The calls made, which seed each call's jitter with the tick count (32 bits: they only tell
/// apart calls made within one tick).
static CALLS: Mutex<Cell<u32>> = Mutex::new(Cell::new(0));

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
            let calls = CALLS.borrow(cs);
            let count = calls.get().wrapping_add(1);
            calls.set(count);
            count
        });
        let ticks = embassy_time::Instant::now().as_ticks();
        SplitMix64::new(ticks ^ u64::from(count).rotate_left(32))
    }

    fn current() -> Option<Deadline> {
        critical_section::with(|cs| CURRENT.borrow(cs).get())
    }

    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
        /// Puts the earlier deadline back, on return and on unwind.
        struct Restore(Option<Deadline>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let earlier = self.0;
                critical_section::with(|cs| CURRENT.borrow(cs).set(earlier));
            }
        }
        let earlier = critical_section::with(|cs| CURRENT.borrow(cs).replace(Some(deadline)));
        let _restore = Restore(earlier);
        f()
    }
}
