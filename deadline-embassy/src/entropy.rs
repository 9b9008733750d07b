//! [`Entropy`]: embassy's default random source for the backoff's jitter.

use core::cell::Cell;

use critical_section::Mutex;
use deadline_core::rng::{Rng, SplitMix64};

/// The draws made, which with the tick count seed each draw (32 bits: they only tell apart
/// draws made within one tick).
static DRAWS: Mutex<Cell<u32>> = Mutex::new(Cell::new(0));

/// The device's seed ([`Entropy::seed`]), mixed into every draw: zero until set.
static SEED: Mutex<Cell<u64>> = Mutex::new(Cell::new(0));

/// embassy's default random source for the backoff's jitter ([`Embassy`](crate::Embassy)'s
/// `Rng`): each draw is a [`SplitMix64`] output seeded from the tick count, a count of the
/// draws made and the device's seed, kept in statics behind a critical section. A
/// microcontroller has no operating system to ask for entropy: give each device its own seed
/// once at start-up ([`Entropy::seed`]), or pass a hardware generator with `.rng(..)`.
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

impl Entropy {
    /// Mixes `seed` into every draw from now on. Call it once at start-up with something
    /// unique to the device: its chip's unique ID, or a word from its hardware random
    /// generator. Without one, a draw depends on the tick count and the number of draws
    /// alone, the same on every device: a fleet that powers up together and meets a failing
    /// server on the same tick would back off by the same jitter, and retry together.
    ///
    /// ```
    /// use deadline_core::rng::Rng;
    /// use deadline_embassy::Entropy;
    ///
    /// // The chip's 96-bit unique ID, folded to 64 bits (here a made-up one).
    /// let uid: [u32; 3] = [0x0035_002B, 0x3436_5111, 0x3338_3034];
    /// Entropy::seed(u64::from(uid[0]) << 32 ^ u64::from(uid[1]) ^ u64::from(uid[2]).rotate_left(17));
    /// let _jitter = Entropy.next_u32();
    /// ```
    pub fn seed(seed: u64) {
        let mixed = mixed(seed);
        critical_section::with(|cs| SEED.borrow(cs).set(mixed));
    }
}

impl Rng for Entropy {
    fn next_u32(&mut self) -> u32 {
        seeded().next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        seeded().next_u64()
    }
}

/// A generator for one draw, seeded from the tick count, the count of draws and the seed.
fn seeded() -> SplitMix64 {
    let (count, seed) = critical_section::with(|cs| {
        let draws = DRAWS.borrow(cs);
        let count = draws.get().wrapping_add(1);
        draws.set(count);
        (count, SEED.borrow(cs).get())
    });
    draw(embassy_time::Instant::now().as_ticks(), count, seed)
}

/// A device's seed as it is kept: mixed, so that devices whose seeds differ in a few bits
/// (serial numbers in sequence) do not differ in the same few bits as their tick counts, which
/// would cancel out.
fn mixed(seed: u64) -> u64 {
    SplitMix64::new(seed).next_u64()
}

/// The generator of the draw numbered `count`, made at `ticks`, on a device whose seed, as
/// kept ([`mixed`]), is `seed`.
fn draw(ticks: u64, count: u32, seed: u64) -> SplitMix64 {
    SplitMix64::new(ticks ^ u64::from(count).rotate_left(32) ^ seed)
}

#[cfg(test)]
mod tests {
    use super::{draw, mixed};
    use deadline_core::rng::Rng;

    /// Devices that power up together, unseeded, would draw the same jitter at the same tick
    /// (the draw is a function of the tick, the count and the seed alone); with serial
    /// numbers in sequence as their seeds, they draw their own, even when their tick counts
    /// differ in the same bits as their serial numbers (kept raw, those would cancel out).
    #[test]
    fn devices_with_their_own_seeds_draw_their_own_jitter() {
        for ticks in [0, 1, 1_000, 32_768, u64::MAX - 7] {
            for count in 1..50 {
                for (a, b) in [
                    (1_u64, 2_u64),
                    (0x0035_002B_3436_5111, 0x0035_002B_3436_5112),
                ] {
                    let apart = a ^ b;
                    let one = draw(ticks, count, mixed(a)).next_u64();
                    let other = draw(ticks ^ apart, count, mixed(b)).next_u64();
                    assert_ne!(one, other, "tick {ticks}, draw {count}, seeds {a} and {b}");
                    // Kept raw, the two would draw the same.
                    assert_eq!(
                        draw(ticks, count, a).next_u64(),
                        draw(ticks ^ apart, count, b).next_u64()
                    );
                }
            }
        }
    }
}
