//! The scenario suite on embassy-time, in virtual time: each scenario's sleeps are embassy
//! timers on the mock driver, and the harness moves the mock driver straight to the next
//! sleep's instant whenever the scenario is waiting.

use std::sync::Mutex;

use deadline_core::{Clock, Instant};
use deadline_embassy::{EmbassyClock, EmbassyTimer};
use deadline_testkit::{Stepper, run_virtual};
use embassy_time::{Duration as EDuration, MockDriver};

/// The mock driver is one global clock: scenarios take turns.
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
                deadline_testkit::scenarios::$name(&stepper),
                advance_to,
            ));
        }
    };
}

deadline_testkit::for_each_scenario!(on_embassy);
