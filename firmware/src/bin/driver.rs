//! The checkout example on the core's sans-IO driver: each call planned with `Plan` and run by
//! `Driver::deadline_only` on deadline-embassy's timer (the way for a custom runtime). Its fast
//! and slow cases, traced and checked against the worked example.

#![no_std]
#![no_main]

use core::fmt;
use core::pin::pin;

use cortex_m_rt::entry;
use deadline_firmware::checkout::{FAST, SLOW};
use deadline_firmware::trace::Trace;
use deadline_firmware::{Sizes, driver_chain, executor, fail, finish, start_clock};

#[entry]
fn main() -> ! {
    executor::run(|spawner| match app() {
        Ok(task) => spawner.spawn(task),
        Err(_) => fail("the application task is already running"),
    })
}

/// The application: both cases of the worked example, checked, then the measurements.
#[embassy_executor::task]
async fn app() {
    start_clock();
    let mut ok = true;
    let mut request_size = 0;
    for case in [&FAST, &SLOW] {
        let mut trace = Trace::new(case.expect);
        let mut log = |line: fmt::Arguments<'_>| trace.line(line);
        let status = {
            let request = pin!(driver_chain::handle(case, &mut log));
            request_size = core::mem::size_of_val(&*request);
            request.await
        };
        ok &= trace.finish() && status == 200;
    }
    finish(
        ok,
        Sizes {
            request: request_size,
            ..Sizes::default()
        },
    );
}
