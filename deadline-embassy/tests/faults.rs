//! The fault suite on embassy-time, in virtual time (the mock driver): a dependency that
//! hangs forever or errors every time, a clock that steps back, a timer that fires late or
//! never, a hedge whose loser never finishes. Each ends by its deadline plus the stated slack
//! with every attempt dropped (see `deadline_testkit::faults`).

use std::sync::Mutex;

use deadline_core::{Clock, Instant};
use deadline_embassy::{EmbassyClock, EmbassyTimer};
use deadline_testkit::{Stepper, run_virtual};
use embassy_time::{Duration as EDuration, MockDriver};

/// The mock driver is one global clock: faults take turns (also with the scenario suite,
/// which is another test binary, so another process).
static DRIVER: Mutex<()> = Mutex::new(());

/// Moves the mock driver's clock forward to `to`.
fn advance_to(to: Instant) {
    let by = to.saturating_duration_since(EmbassyClock.now());
    MockDriver::get().advance(EDuration::from_micros(
        u64::try_from(by.as_micros()).unwrap_or(u64::MAX),
    ));
}

macro_rules! on_embassy {
    ($name:ident) => {
        #[test]
        fn $name() {
            let _turn = DRIVER.lock().unwrap_or_else(|e| e.into_inner());
            let stepper = Stepper::new(EmbassyTimer);
            embassy_futures::block_on(run_virtual(
                &stepper,
                deadline_testkit::faults::$name(&stepper),
                advance_to,
            ));
        }
    };
}

deadline_testkit::for_each_fault!(on_embassy);
