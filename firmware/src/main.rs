//! The checkout example on the one-line call, deadline-only: A, B and C are
//! `Dependency<Embassy, DeadlineOnly>` statics (one attempt per call, its timeout from the time
//! left, nothing else linked), each call `DEP.run(..).in_plan(&STEPS).await` inside the
//! request's scope. Its fast and slow cases, traced and checked against the worked example.

#![no_std]
#![no_main]

use core::fmt;
use core::pin::pin;

use cortex_m_rt::entry;
use deadline_core::drive::DeadlineOnly;
use deadline_core::{Dependency, Steps};
use deadline_embassy::Embassy;
use deadline_firmware::checkout::{self, FAST, OWN_WORK, SLOW};
use deadline_firmware::trace::Trace;
use deadline_firmware::{Sizes, executor, fail, finish, one_line, start_clock};

/// A, user profile.
static A: Dependency<Embassy, DeadlineOnly> = Dependency::deadline_only(checkout::A);
/// B, pricing.
static B: Dependency<Embassy, DeadlineOnly> = Dependency::deadline_only(checkout::B);
/// C, recommendations (optional).
static C: Dependency<Embassy, DeadlineOnly> = Dependency::deadline_only(checkout::C);
/// The request's calls in order, and its own work after them: each call's reserve.
static STEPS: Steps<Embassy, 3, DeadlineOnly> = Steps::new([&A, &B, &C]).own_work(OWN_WORK);

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
    let mut sizes = Sizes {
        call: Some(one_line::one_call_future(&STEPS)),
        ..Sizes::default()
    };
    for case in [&FAST, &SLOW] {
        let mut trace = Trace::new(case.expect);
        let mut log = |line: fmt::Arguments<'_>| trace.line(line);
        let handled = {
            let request = pin!(one_line::handle(&STEPS, case, &mut log));
            sizes.request = core::mem::size_of_val(&*request);
            request.await
        };
        sizes.traced_call = Some(handled.call_future);
        ok &= trace.finish() && handled.status == 200;
    }
    finish(ok, sizes);
}
