//! [`EmbassyClock`] and [`EmbassyTimer`]: the core's clock and timer on `embassy-time`.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use deadline_core::{Clock, Instant, Timer};
use embassy_time::TICK_HZ;

/// Microseconds in one second.
const MICROS_PER_SEC: u64 = 1_000_000;

/// Ticks to microseconds at embassy's tick rate, reduced once at compile time.
const TICKS_TO_MICROS: Ratio = Ratio::new(MICROS_PER_SEC, TICK_HZ);
/// Microseconds to ticks at embassy's tick rate, reduced once at compile time.
const MICROS_TO_TICKS: Ratio = Ratio::new(TICK_HZ, MICROS_PER_SEC);

/// Converts an embassy instant to a core [`Instant`]: whole microseconds since embassy's
/// origin (boot), rounded down, for any tick rate. Saturates at [`Instant::MAX`].
///
/// ```
/// use deadline_embassy::from_embassy;
///
/// // Two seconds are a whole number of ticks at every tick rate.
/// let t = embassy_time::Instant::from_ticks(embassy_time::TICK_HZ * 2);
/// assert_eq!(from_embassy(t), deadline_core::Instant::from_secs(2));
/// ```
#[must_use]
pub const fn from_embassy(t: embassy_time::Instant) -> Instant {
    Instant::from_micros(TICKS_TO_MICROS.floor(t.as_ticks()))
}

/// Converts a core [`Instant`] to the first embassy instant at or after it (rounding up to a
/// whole tick), so a timer armed at it never fires before the core instant. Saturates at
/// [`embassy_time::Instant::MAX`], which never comes; the core's [`Instant::MAX`] (never) is
/// that one at every tick rate, which embassy's timer queue leaves out.
///
/// ```
/// use deadline_core::Instant;
/// use deadline_embassy::{from_embassy, to_embassy};
///
/// let at = Instant::from_micros(1_234_567);
/// assert!(from_embassy(to_embassy(at)) >= at);
/// ```
#[must_use]
// One copy: at most tick rates the conversion is a 64-bit division, a builtin call and its
// set-up on a microcontroller, and the timer and an application's own sleeps each use it.
#[inline(never)]
pub const fn to_embassy(t: Instant) -> embassy_time::Instant {
    embassy_time::Instant::from_ticks(ticks_at(t, MICROS_TO_TICKS))
}

/// The first tick at or after `t`, `ratio` ticks to a microsecond. The core's never
/// ([`Instant::MAX`]) is embassy's (`u64::MAX` ticks) at every rate, where the scaled count
/// would be a tick far off but finite below 1 MHz, which embassy's timer queue keeps armed.
const fn ticks_at(t: Instant, ratio: Ratio) -> u64 {
    if t.as_micros() == Instant::MAX.as_micros() {
        u64::MAX
    } else {
        ratio.ceil(t.as_micros())
    }
}

/// The ratio `num / den` of two rates, in lowest terms, to scale a count by it exactly.
///
/// `x * num / den` is computed as `(x / den) * num + (x % den) * num / den`: exact, and in
/// `u64` whenever `(den - 1) * num` fits in a `u64`, which [`Ratio::new`] works out once. At
/// every tick rate up to 18 THz, and so at all of embassy's, that holds: the conversions take a
/// few 64-bit operations, with no 128-bit multiplication or division. Past it they fall back
/// to `u128`.
#[derive(Clone, Copy, Debug)]
struct Ratio {
    num: u64,
    /// At least 1.
    den: u64,
    /// Whether `(den - 1) * num` overflows a `u64`.
    wide: bool,
    /// The largest `x / den` whose product with `num` fits in a `u64`: beyond it, the result
    /// saturates (a compare, where `checked_mul` would take a 64-bit multiply's high half,
    /// which a Cortex-M0 has no instruction for).
    max_whole: u64,
}

impl Ratio {
    /// `num / den` in lowest terms. A `den` of zero makes the ratio zero (a tick rate of zero
    /// reads as the origin).
    const fn new(num: u64, den: u64) -> Ratio {
        if den == 0 || num == 0 {
            return Ratio {
                num: 0,
                den: 1,
                wide: false,
                max_whole: u64::MAX,
            };
        }
        let g = gcd(num, den);
        let (num, den) = (num / g, den / g);
        Ratio {
            num,
            den,
            wide: (den - 1).checked_mul(num).is_none(),
            max_whole: u64::MAX / num,
        }
    }

    /// `x * num / den`, rounded down, saturating. Inlined, so that with embassy's tick rate
    /// (a constant) the divisions by a `den` of 1 and the multiplications by a `num` of 1
    /// vanish.
    #[inline(always)]
    const fn floor(self, x: u64) -> u64 {
        if self.wide {
            return saturate((x as u128) * (self.num as u128) / (self.den as u128));
        }
        // The remainder's part fits: `(x % den) * num <= (den - 1) * num`, checked in `new`.
        let part = (x % self.den) * self.num / self.den;
        let whole = x / self.den;
        if whole > self.max_whole {
            return u64::MAX;
        }
        (whole * self.num).saturating_add(part)
    }

    /// `x * num / den`, rounded up, saturating. Inlined, as [`floor`](Self::floor) is.
    #[inline(always)]
    const fn ceil(self, x: u64) -> u64 {
        if self.wide {
            return saturate(((x as u128) * (self.num as u128)).div_ceil(self.den as u128));
        }
        let part = ((x % self.den) * self.num).div_ceil(self.den);
        let whole = x / self.den;
        if whole > self.max_whole {
            return u64::MAX;
        }
        (whole * self.num).saturating_add(part)
    }
}

/// The greatest common divisor of two numbers, not both zero.
const fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// `x`, or `u64::MAX` if it does not fit.
const fn saturate(x: u128) -> u64 {
    if x > u64::MAX as u128 {
        u64::MAX
    } else {
        x as u64
    }
}

/// `ticks * 1e6 / hz`, rounded down, saturating. A tick rate of zero reads as the origin.
#[cfg(test)]
const fn ticks_to_micros(ticks: u64, hz: u64) -> u64 {
    Ratio::new(MICROS_PER_SEC, hz).floor(ticks)
}

/// `micros * hz / 1e6`, rounded up, saturating: the first tick whose reading in microseconds
/// (rounded down) is at least `micros`.
#[cfg(test)]
const fn micros_to_ticks(micros: u64, hz: u64) -> u64 {
    Ratio::new(hz, MICROS_PER_SEC).ceil(micros)
}

/// The core's [`Clock`] on [`embassy_time::Instant::now`].
///
/// ```rust,standalone_crate
/// use deadline_core::{Clock, ms};
/// use deadline_embassy::EmbassyClock;
///
/// let before = EmbassyClock.now();
/// // On a device the hardware moves the clock; in this host test, embassy's mock driver.
/// embassy_time::MockDriver::get().advance(embassy_time::Duration::from_millis(50));
/// assert_eq!(EmbassyClock.now() - before, ms(50));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EmbassyClock;

impl Clock for EmbassyClock {
    // One copy, sized for flash: the tick conversion would be repeated wherever the clock
    // is read.
    #[inline(never)]
    fn now(&self) -> Instant {
        from_embassy(embassy_time::Instant::now())
    }
}

/// The core's [`Timer`] on [`embassy_time::Timer::at`]; its clock is [`EmbassyClock`].
///
/// The sleep is an [`EmbassySleep`]: the instant it ends, on embassy's timer queue, owned and
/// allocation-free (8 bytes); dropping it cancels it (embassy's queue cannot take a wake-up
/// back: its task may still be woken once at the instant, for nothing).
///
/// ```rust,standalone_crate
/// use core::pin::pin;
/// use core::task::{Context, Waker};
/// use deadline_core::{Clock, Timer, ms};
/// use deadline_embassy::EmbassyTimer;
///
/// let start = EmbassyTimer.now();
/// let mut sleep = pin!(EmbassyTimer.sleep_until(start + ms(110)));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(sleep.as_mut().poll(&mut cx).is_pending());
/// // In this host test, embassy's mock driver stands in for the hardware timer.
/// embassy_time::MockDriver::get().advance(embassy_time::Duration::from_millis(110));
/// assert!(sleep.as_mut().poll(&mut cx).is_ready());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EmbassyTimer;

impl Clock for EmbassyTimer {
    fn now(&self) -> Instant {
        EmbassyClock.now()
    }
}

impl Timer for EmbassyTimer {
    type Sleep = EmbassySleep;
    const SLEEP_READS_CLOCK: bool = true;

    // One copy, as for `now`.
    #[inline(never)]
    fn sleep_until(&self, at: Instant) -> EmbassySleep {
        EmbassySleep { at: to_embassy(at) }
    }
}

/// The future of [`EmbassyTimer::sleep_until`]: [`embassy_time::Timer`]'s, except that an
/// instant already reached completes at the first poll (embassy's timer always yields once
/// first), as the core's [`Timer`] contract asks. It keeps only the instant: each poll before
/// it registers the waker for it on embassy's timer queue, as a new [`embassy_time::Timer`]
/// does on its first poll.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "futures do nothing unless polled"]
pub struct EmbassySleep {
    at: embassy_time::Instant,
}

impl Future for EmbassySleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if embassy_time::Instant::now() >= self.at {
            return Poll::Ready(());
        }
        // A timer polled for the first time schedules its wake-up and says it is pending
        // (embassy's timers keep nothing in the queue and have no drop: only the waker is
        // registered, at `at`).
        let mut timer = embassy_time::Timer::at(self.at);
        Pin::new(&mut timer).poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::{MICROS_PER_SEC, Ratio, micros_to_ticks, ticks_at, ticks_to_micros};
    use deadline_core::Instant;

    /// The core's never is embassy's never at every tick rate (below 1 MHz the scaled count
    /// of `Instant::MAX` was a finite tick: 604 462 909 807 314 588 at 32 768 Hz), and an
    /// instant short of it converts as any other.
    #[test]
    fn never_is_embassys_never_at_every_tick_rate() {
        for hz in RATES {
            let ratio = Ratio::new(hz, MICROS_PER_SEC);
            assert_eq!(ticks_at(Instant::MAX, ratio), u64::MAX, "{hz} Hz");
            let before = Instant::from_micros(u64::MAX - 1);
            assert_eq!(
                ticks_at(before, ratio),
                micros_to_ticks(u64::MAX - 1, hz),
                "{hz} Hz"
            );
        }
    }

    /// Tick rates embassy offers, including ones that do not divide a microsecond evenly, and
    /// rates past 18 THz, where the conversions take the 128-bit path.
    const RATES: [u64; 11] = [
        1,
        32_768,
        1_000,
        1_000_000,
        16_777_216,
        1_000_000_000,
        3,
        7_000_003,
        20_000_000_000_000,
        (1 << 63) + 1,
        u64::MAX,
    ];

    /// Counts to convert: small, round, odd, and near the top of the range.
    const COUNTS: [u64; 14] = [
        0,
        1,
        999,
        1_000,
        30_517,
        160_000,
        999_999,
        1_000_001,
        1 << 40,
        u64::MAX / 2,
        u64::MAX / 1_000_000,
        u64::MAX / 1_000_000 + 1,
        u64::MAX - 1,
        u64::MAX,
    ];

    /// The plain 128-bit definitions the conversions must agree with.
    fn reference(x: u64, num: u64, den: u64, up: bool) -> u64 {
        if den == 0 {
            return 0;
        }
        let scaled = u128::from(x) * u128::from(num);
        let q = if up {
            scaled.div_ceil(u128::from(den))
        } else {
            scaled / u128::from(den)
        };
        u64::try_from(q).unwrap_or(u64::MAX)
    }

    #[test]
    fn conversions_agree_with_128_bit_arithmetic() {
        for hz in RATES.into_iter().chain([0]) {
            for x in COUNTS {
                assert_eq!(
                    ticks_to_micros(x, hz),
                    reference(x, MICROS_PER_SEC, hz, false),
                    "ticks {x} hz {hz}"
                );
                assert_eq!(
                    micros_to_ticks(x, hz),
                    reference(x, hz, MICROS_PER_SEC, true),
                    "micros {x} hz {hz}"
                );
            }
        }
    }

    #[test]
    fn ratios_agree_with_128_bit_arithmetic_over_a_sweep() {
        // A deterministic spread of ratios and counts (xorshift), both paths.
        let mut s = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..2_000 {
            let (num, den) = (next() >> (next() % 64), next() >> (next() % 64));
            let ratio = Ratio::new(num, den);
            for _ in 0..8 {
                let x = next() >> (next() % 64);
                let (floor, ceil) = if num == 0 {
                    (0, 0)
                } else {
                    (reference(x, num, den, false), reference(x, num, den, true))
                };
                assert_eq!(ratio.floor(x), floor, "{x} * {num} / {den}");
                assert_eq!(ratio.ceil(x), ceil, "{x} * {num} / {den}");
            }
        }
    }

    #[test]
    fn the_rates_embassy_offers_stay_on_the_64_bit_path() {
        for hz in [
            1,
            10,
            100,
            1_000,
            32_768,
            1_000_000,
            16_000_000,
            1_000_000_000,
        ] {
            assert!(!Ratio::new(MICROS_PER_SEC, hz).wide, "{hz}");
            assert!(!Ratio::new(hz, MICROS_PER_SEC).wide, "{hz}");
        }
        assert!(Ratio::new(MICROS_PER_SEC, u64::MAX).wide);
    }

    #[test]
    fn ticks_convert_back_to_the_first_tick_at_or_after_the_instant() {
        for hz in RATES {
            for micros in COUNTS {
                let ticks = micros_to_ticks(micros, hz);
                if ticks == u64::MAX {
                    // Past the last tick: the instant never comes (embassy's `Instant::MAX`).
                    assert!(
                        u128::from(micros) * u128::from(hz) > u128::from(u64::MAX - 1) * 1_000_000
                    );
                    continue;
                }
                // At or after the instant...
                assert!(
                    ticks_to_micros(ticks, hz) >= micros,
                    "hz {hz} micros {micros}"
                );
                // ...and the tick before it is before the instant.
                if ticks > 0 {
                    assert!(
                        ticks_to_micros(ticks - 1, hz) < micros,
                        "hz {hz} micros {micros}"
                    );
                }
            }
        }
    }

    #[test]
    fn extremes_saturate() {
        assert_eq!(micros_to_ticks(u64::MAX, 1_000_000_000), u64::MAX);
        assert_eq!(ticks_to_micros(u64::MAX, 1), u64::MAX);
        assert_eq!(ticks_to_micros(u64::MAX, 0), 0);
        assert_eq!(micros_to_ticks(u64::MAX, 0), 0);
    }
}
