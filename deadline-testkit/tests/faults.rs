//! The fault suite on the core's own virtual-time timer and its tiny executor.

use deadline_core::virtual_time::ManualTimer;

macro_rules! on_manual_timer {
    ($name:ident) => {
        #[test]
        fn $name() {
            let timer = ManualTimer::new();
            timer
                .run(deadline_testkit::faults::$name(&timer))
                .expect("the fault stalled");
        }
    };
}

deadline_testkit::for_each_fault!(on_manual_timer);
