//! [`EmbassyClock`] and [`EmbassyTimer`]: the core's clock and timer on `embassy-time`.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use deadline_core::{Clock, Instant, Timer};
use embassy_time::TICK_HZ;

/// Microseconds in one second.
const MICROS_PER_SEC: u128 = 1_000_000;

/// Converts an embassy instant to a core [`Instant`]: whole microseconds since embassy's
/// origin (boot), rounded down, for any tick rate. Saturates at [`Instant::MAX`].
///
/// ```
/// use deadline_embassy::from_embassy;
///
/// let t = embassy_time::Instant::from_ticks(embassy_time::TICK_HZ / 1000 * 160);
/// assert_eq!(from_embassy(t), deadline_core::Instant::from_millis(160));
/// ```
#[must_use]
pub const fn from_embassy(t: embassy_time::Instant) -> Instant {
    Instant::from_micros(ticks_to_micros(t.as_ticks(), TICK_HZ))
}

/// Converts a core [`Instant`] to the first embassy instant at or after it (rounding up to a
/// whole tick), so a timer armed at it never fires before the core instant. Saturates at
/// [`embassy_time::Instant::MAX`], which never comes.
///
/// ```
/// use deadline_core::Instant;
/// use deadline_embassy::{from_embassy, to_embassy};
///
/// let at = Instant::from_micros(1_234_567);
/// assert!(from_embassy(to_embassy(at)) >= at);
/// ```
#[must_use]
pub const fn to_embassy(t: Instant) -> embassy_time::Instant {
    embassy_time::Instant::from_ticks(micros_to_ticks(t.as_micros(), TICK_HZ))
}

/// `ticks * 1e6 / hz`, rounded down, saturating. A tick rate of zero reads as the origin.
pub(crate) const fn ticks_to_micros(ticks: u64, hz: u64) -> u64 {
    if hz == 0 {
        return 0;
    }
    let micros = (ticks as u128) * MICROS_PER_SEC / (hz as u128);
    if micros > u64::MAX as u128 {
        u64::MAX
    } else {
        micros as u64
    }
}

/// `micros * hz / 1e6`, rounded up, saturating: the first tick whose reading in microseconds
/// (rounded down) is at least `micros`.
pub(crate) const fn micros_to_ticks(micros: u64, hz: u64) -> u64 {
    let scaled = (micros as u128) * (hz as u128);
    let ticks = scaled.div_ceil(MICROS_PER_SEC);
    if ticks > u64::MAX as u128 {
        u64::MAX
    } else {
        ticks as u64
    }
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
    fn now(&self) -> Instant {
        from_embassy(embassy_time::Instant::now())
    }
}

/// The core's [`Timer`] on [`embassy_time::Timer::at`]; its clock is [`EmbassyClock`].
///
/// The sleep is an [`EmbassySleep`]: embassy's own timer, owned and allocation-free; dropping
/// it cancels it.
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

    fn sleep_until(&self, at: Instant) -> EmbassySleep {
        let at = to_embassy(at);
        EmbassySleep {
            at,
            timer: embassy_time::Timer::at(at),
        }
    }
}

/// The future of [`EmbassyTimer::sleep_until`]: [`embassy_time::Timer`], except that an
/// instant already reached completes at the first poll (embassy's timer always yields once
/// first), as the core's [`Timer`] contract asks.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "futures do nothing unless polled"]
pub struct EmbassySleep {
    at: embassy_time::Instant,
    timer: embassy_time::Timer,
}

impl Future for EmbassySleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if embassy_time::Instant::now() >= self.at {
            return Poll::Ready(());
        }
        Pin::new(&mut self.timer).poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::{micros_to_ticks, ticks_to_micros};

    /// Tick rates embassy offers, including ones that do not divide a microsecond evenly.
    const RATES: [u64; 7] = [1, 32_768, 1_000, 1_000_000, 16_777_216, 1_000_000_000, 3];

    #[test]
    fn ticks_convert_back_to_the_first_tick_at_or_after_the_instant() {
        for hz in RATES {
            for micros in [0, 1, 999, 1_000, 30_517, 160_000, 1 << 40, u64::MAX / 2] {
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
    }
}
