//! The clock and the timer on embassy-time's mock driver: virtual time, moved by hand.

use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use deadline_core::{Clock, Instant, Timer, ms};
use deadline_embassy::{EmbassyClock, EmbassyTimer, from_embassy, to_embassy};
use embassy_time::{Duration as EDuration, MockDriver};

/// The mock driver is one global clock: tests that move it take turns.
static DRIVER: Mutex<()> = Mutex::new(());

fn advance_ms(n: u64) {
    MockDriver::get().advance(EDuration::from_millis(n));
}

#[test]
fn the_clock_reads_the_mock_driver() {
    let _turn = DRIVER.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = EmbassyClock.now();
    assert_eq!(from_embassy(embassy_time::Instant::now()), t0);
    advance_ms(115);
    assert_eq!(EmbassyClock.now() - t0, ms(115));
    assert_eq!(EmbassyTimer.now(), EmbassyClock.now());
}

#[test]
fn the_timer_fires_at_its_instant_and_not_before() {
    let _turn = DRIVER.lock().unwrap_or_else(|e| e.into_inner());
    let mut cx = Context::from_waker(Waker::noop());
    let t0 = EmbassyTimer.now();
    let mut sleep = pin!(EmbassyTimer.sleep_until(t0 + ms(160)));
    assert_eq!(sleep.as_mut().poll(&mut cx), Poll::Pending);
    advance_ms(159);
    assert_eq!(sleep.as_mut().poll(&mut cx), Poll::Pending);
    advance_ms(1);
    assert_eq!(sleep.as_mut().poll(&mut cx), Poll::Ready(()));
    assert_eq!(EmbassyTimer.now() - t0, ms(160));
}

#[test]
fn a_past_instant_is_ready_at_once_and_never_never_is() {
    let _turn = DRIVER.lock().unwrap_or_else(|e| e.into_inner());
    let mut cx = Context::from_waker(Waker::noop());
    let past = pin!(EmbassyTimer.sleep_until(Instant::ZERO));
    assert_eq!(past.poll(&mut cx), Poll::Ready(()));
    let mut never = pin!(EmbassyTimer.sleep_until(Instant::MAX));
    assert_eq!(never.as_mut().poll(&mut cx), Poll::Pending);
    advance_ms(1_000_000);
    assert_eq!(never.as_mut().poll(&mut cx), Poll::Pending);
}

#[test]
fn instants_convert_both_ways_at_the_test_tick_rate() {
    // The mock driver runs at 1 MHz: one tick is one microsecond.
    assert_eq!(embassy_time::TICK_HZ, 1_000_000);
    let at = Instant::from_micros(176_000);
    assert_eq!(to_embassy(at).as_ticks(), 176_000);
    assert_eq!(from_embassy(to_embassy(at)), at);
    assert_eq!(to_embassy(Instant::MAX), embassy_time::Instant::MAX);
}
