//! An `embassy-time` driver on SysTick: a 1 kHz tick counted in 64 bits, and embassy's
//! integrated timer queue (its items live in the executor's tasks: no fixed capacity).
//!
//! The boards emulated here have no embassy HAL; SysTick is on every Cortex-M. It counts the
//! processor clock, which QEMU runs at 16 MHz on the micro:bit and at 25 MHz on the MPS2
//! boards. Each SysTick exception adds one tick and, once the earliest alarm is due, wakes
//! every expired timer and finds the next alarm.
//!
//! Counting exceptions loses time whenever interrupts stay masked for longer than a tick (the
//! exception can be pending only once): on a board with a debug probe, semihosting output,
//! which masks interrupts while it writes, would slow this clock and make every deadline late.
//! Under QEMU's instruction counting it does not show. On hardware, use the HAL's time driver,
//! which reads a free-running counter.

use core::cell::{Cell, RefCell};
use core::task::Waker;

use cortex_m::peripheral::SYST;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::exception;
use critical_section::Mutex;
use embassy_time_driver::{Driver, TICK_HZ};
use embassy_time_queue_utils::Queue;

/// The processor clock SysTick counts, in Hz.
#[cfg(board = "microbit")]
const CPU_HZ: u64 = 16_000_000;
/// The processor clock SysTick counts, in Hz.
#[cfg(board = "mps2")]
const CPU_HZ: u64 = 25_000_000;

/// SysTick's reload value: one exception per tick. SysTick's counter has 24 bits.
const RELOAD: u32 = {
    let cycles = CPU_HZ / TICK_HZ;
    assert!(
        CPU_HZ % TICK_HZ == 0,
        "the tick rate divides the processor clock"
    );
    assert!(
        cycles >= 2 && cycles <= 1 << 24,
        "one tick fits SysTick's 24-bit counter"
    );
    (cycles - 1) as u32
};

/// The time driver's state, shared by thread mode and the SysTick exception.
struct SysTickDriver {
    /// Ticks since [`start`].
    ticks: Mutex<Cell<u64>>,
    /// The tick at which the queue has its next expiry (`u64::MAX`: none).
    alarm: Mutex<Cell<u64>>,
    /// The timers waiting.
    queue: Mutex<RefCell<Queue>>,
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver {
    ticks: Mutex::new(Cell::new(0)),
    alarm: Mutex::new(Cell::new(u64::MAX)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

impl Driver for SysTickDriver {
    fn now(&self) -> u64 {
        critical_section::with(|cs| self.ticks.borrow(cs).get())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let mut queue = self.queue.borrow_ref_mut(cs);
            if queue.schedule_wake(at, waker) {
                let now = self.ticks.borrow(cs).get();
                self.alarm.borrow(cs).set(queue.next_expiration(now));
            }
        });
    }
}

impl SysTickDriver {
    /// One tick: count it, and wake the timers that are due.
    fn tick(&self) {
        critical_section::with(|cs| {
            let ticks = self.ticks.borrow(cs);
            let now = ticks.get().saturating_add(1);
            ticks.set(now);
            let alarm = self.alarm.borrow(cs);
            if now >= alarm.get() {
                alarm.set(self.queue.borrow_ref_mut(cs).next_expiration(now));
            }
        });
    }
}

/// Starts the clock: SysTick on the processor clock, one exception per tick.
pub fn start(mut syst: SYST) {
    syst.disable_counter();
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(RELOAD);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    DRIVER.tick();
}
