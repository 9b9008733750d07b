//! The scenario suite on tokio, in paused time: each scenario's sleeps are tokio timers, and
//! the runtime's auto-advance moves the clock to the next one.

use deadline_tokio::time::TokioTimer;

macro_rules! on_tokio {
    ($name:ident) => {
        #[tokio::test(start_paused = true)]
        async fn $name() {
            deadline_testkit::scenarios::$name(TokioTimer).await;
        }
    };
}

deadline_testkit::for_each_scenario!(on_tokio);
