//! The suite on the core's own virtual-time timer and its tiny executor: the baseline the
//! adapters are compared with.

use deadline_core::virtual_time::ManualTimer;

macro_rules! on_manual_timer {
    ($name:ident) => {
        #[test]
        fn $name() {
            let timer = ManualTimer::new();
            timer
                .run(deadline_testkit::scenarios::$name(&timer))
                .expect("the scenario stalled");
        }
    };
}

deadline_testkit::for_each_scenario!(on_manual_timer);
