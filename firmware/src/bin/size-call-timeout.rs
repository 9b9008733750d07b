//! A code-size probe: a binary that links `deadline_core::call::call_timeout` and nothing else of
//! the core, its inputs and its result passed through `core::hint::black_box` so that nothing
//! is folded away. It is built to be measured (`scripts/core-size.sh`), not run.

#![no_std]
#![no_main]

use core::hint::black_box;

use cortex_m_rt::entry;
use deadline_core::call::call_timeout;
use deadline_core::{Deadline, Instant, Policy, ms};

/// The dependency's policy: static, as at a real call site, and seen by the optimiser only
/// through `black_box`.
static POLICY: Policy = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));

#[entry]
fn main() -> ! {
    loop {
        let deadline = black_box(Deadline::at(Instant::from_micros(black_box(200_000))));
        let now = Instant::from_micros(black_box(156_000));
        keep(call_timeout(
            black_box(&POLICY),
            deadline,
            black_box(ms(20)),
            now,
        ));
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    cortex_m::asm::udf()
}

/// Keeps a result: the optimiser must assume it is read.
fn keep<T>(value: T) {
    let _ = black_box(value);
}
