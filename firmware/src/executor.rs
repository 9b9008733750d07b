//! A thread-mode executor that sleeps in WFI.
//!
//! embassy-executor's Cortex-M executor sleeps in WFE, which QEMU runs as a no-op: the
//! processor would spin through every millisecond of virtual time. WFI really sleeps, and
//! with QEMU's `-icount sleep=off` virtual time jumps to the next SysTick exception, so a run
//! takes a few hundredths of a second. On hardware WFI is as good.

use core::cell::Cell;

use critical_section::Mutex;
use embassy_executor::{Spawner, raw};

/// Set when a task was woken and the executor has work; cleared before it polls.
static WORK: Mutex<Cell<bool>> = Mutex::new(Cell::new(false));

// SAFETY: `__pender` is the symbol embassy's raw executor calls when a task is woken; this
// binary exports it once (no embassy platform feature is on), with the signature embassy
// declares. It only sets a flag: it never polls.
#[unsafe(export_name = "__pender")]
fn pender(_context: *mut ()) {
    critical_section::with(|cs| WORK.borrow(cs).set(true));
}

/// Runs the executor: `init` spawns the tasks, then it polls them whenever one is woken, and
/// sleeps in WFI in between. Never returns.
pub fn run(init: impl FnOnce(Spawner)) -> ! {
    let Some(executor) =
        cortex_m::singleton!(: raw::Executor = raw::Executor::new(core::ptr::null_mut()))
    else {
        panic!("the executor runs once")
    };
    let executor: &'static raw::Executor = executor;
    init(executor.spawner());
    loop {
        // SAFETY: `poll` is called only here, in thread mode, never reentrantly: the pender
        // (which may run inside `poll` or in an exception) only sets `WORK`.
        unsafe { executor.poll() };
        critical_section::with(|cs| {
            // No wake-up is lost: one that came during `poll` left `WORK` set, and an
            // exception pending here (masked by the critical section) still ends the WFI.
            if !WORK.borrow(cs).replace(false) {
                cortex_m::asm::wfi();
            }
        });
    }
}
