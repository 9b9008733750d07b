//! The checkout example as Cortex-M firmware: what its binaries share.
//!
//! Each binary runs the checkout example's cases under QEMU (micro:bit for the Cortex-M0, MPS2
//! for the M3 and M4F), prints the trace through semihosting, compares it line by line with the
//! expected one, prints its sizes and the peak stack, and exits with status 0 when every line
//! matched, 1 otherwise:
//!
//! - `deadline-firmware`: the one-line call, `Dependency<Embassy, DeadlineOnly>` statics;
//! - `deadline-firmware-full`: the one-line call in full mode, with retries and a hedge after
//!   the live p95 that fire;
//! - `deadline-firmware-driver`: the core's sans-IO driver, `Driver::deadline_only`, on the
//!   adapter's timer.
//!
//! No heap: there is no global allocator.

#![no_std]

pub mod checkout;
pub mod driver_chain;
pub mod executor;
pub mod one_line;
pub mod stack;
pub mod systick;
pub mod trace;

use cortex_m_semihosting::{debug, heprintln, hprintln};

/// Starts the clock: the core peripherals' SysTick, one exception per tick. Call it once,
/// first thing in the application task.
pub fn start_clock() {
    let Some(peripherals) = cortex_m::Peripherals::take() else {
        fail("the core peripherals were taken before the application started")
    };
    systick::start(peripherals.SYST);
}

/// The sizes a binary prints.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sizes {
    /// The request handler's future.
    pub request: usize,
    /// One call's future, with the smallest attempt (one embassy timer), if the binary makes
    /// its calls through `Dependency::run`.
    pub call: Option<usize>,
    /// One traced call's future (its attempt function logs and simulates the dependency).
    pub traced_call: Option<usize>,
}

/// Prints the sizes the size script reads (`request future`, `call future`, `traced call
/// future`) and the peak stack, then exits: with status 0 if `ok`, 1 otherwise.
pub fn finish(ok: bool, sizes: Sizes) -> ! {
    let (stack, used) = stack::peak();
    hprintln!("request future: {} bytes", sizes.request);
    if let Some(call) = sizes.call {
        hprintln!("call future: {} bytes", call);
    }
    if let Some(call) = sizes.traced_call {
        hprintln!("traced call future: {} bytes", call);
    }
    hprintln!("peak stack: {} of {} bytes", used, stack);
    if ok {
        hprintln!("trace matches the worked example");
        debug::exit(debug::EXIT_SUCCESS);
        loop {
            cortex_m::asm::wfi();
        }
    } else {
        fail("the trace differs from the worked example");
    }
}

/// Says why, and exits with status 1.
pub fn fail(why: &str) -> ! {
    heprintln!("firmware: {}", why);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    heprintln!("panic: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
