//! [`Entropy`]: embassy's default random source for the backoff's jitter.

use core::cell::Cell;

use critical_section::Mutex;
use deadline_core::rng::{Rng, SplitMix64};

/// The draws made, which with the tick count seed each draw (32 bits: they only tell apart
/// draws made within one tick).
static DRAWS: Mutex<Cell<u32>> = Mutex::new(Cell::new(0));

/// embassy's default random source for the backoff's jitter ([`Embassy`](crate::Embassy)'s
/// `Rng`): each draw is a [`SplitMix64`] output seeded from the tick count and a count of the
/// draws made, kept in a static behind a critical section. A microcontroller has no operating
/// system to ask for entropy; pass a hardware generator with `.rng(..)` where there is one.
///
/// It is zero-sized and reads nothing until a draw: a call carries no generator of its own,
/// and a call that draws no jitter (a deadline-only dependency, a call whose first attempt
/// answers) costs nothing for it.
///
/// ```
/// use deadline_core::rng::Rng;
/// use deadline_embassy::Entropy;
///
/// assert_eq!(core::mem::size_of::<Entropy>(), 0);
/// // Two draws in the same tick differ: the count of draws tells them apart.
/// assert_ne!(Entropy.next_u64(), Entropy.next_u64());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Entropy;

impl Rng for Entropy {
    fn next_u32(&mut self) -> u32 {
        seeded().next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        seeded().next_u64()
    }
}

/// A generator for one draw, seeded from the tick count and the count of draws.
fn seeded() -> SplitMix64 {
    let count = critical_section::with(|cs| {
        let draws = DRAWS.borrow(cs);
        let count = draws.get().wrapping_add(1);
        draws.set(count);
        count
    });
    let ticks = embassy_time::Instant::now().as_ticks();
    SplitMix64::new(ticks ^ u64::from(count).rotate_left(32))
}
