//! The scenario suite on the async-std and smol executors, with the core's virtual-time
//! timer ([`ManualTimer`]): async-io, under both, has no virtual time. Each scenario runs as a
//! task of the executor; whenever it waits, the harness moves the virtual clock to the next
//! sleep's instant and wakes the task through the executor's own waker.

use deadline_core::virtual_time::ManualTimer;
use deadline_testkit::{Stepper, run_virtual};

macro_rules! on_async_std_and_smol {
    ($name:ident) => {
        mod $name {
            use super::*;

            #[test]
            fn async_std() {
                let timer = ManualTimer::new();
                let stepper = Stepper::new(&timer);
                async_std::task::block_on(run_virtual(
                    &stepper,
                    deadline_testkit::scenarios::$name(&stepper),
                    |to| timer.clock().set(to),
                ));
            }

            #[test]
            fn smol() {
                let timer = ManualTimer::new();
                let stepper = Stepper::new(&timer);
                let executor = smol::LocalExecutor::new();
                let task = executor.spawn(run_virtual(
                    &stepper,
                    deadline_testkit::scenarios::$name(&stepper),
                    |to| timer.clock().set(to),
                ));
                smol::block_on(executor.run(task));
            }
        }
    };
}

deadline_testkit::for_each_scenario!(on_async_std_and_smol);
