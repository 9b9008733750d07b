//! Seed 000's A -> B -> C chain on a real runtime, with the dependencies simulated on the
//! runtime's own timer: the fast case, then the slow case.
//!
//! The same program runs on every runtime; one feature flag picks it:
//!
//! ```text
//! cargo run -p deadline-examples --bin chain                                         # tokio
//! cargo run -p deadline-examples --bin chain --no-default-features --features async-std
//! cargo run -p deadline-examples --bin chain --no-default-features --features smol
//! cargo run -p deadline-examples --bin chain --no-default-features --features embassy
//! ```
//!
//! Only the `runtime` module below differs per runtime; the application code is generic over
//! the core's `Timer`.

use deadline_core::{Timer, ms};
use deadline_examples::chain::{Case, FAST, SLOW, handle};

#[cfg(not(any(
    feature = "tokio",
    feature = "async-std",
    feature = "smol",
    feature = "embassy"
)))]
compile_error!(
    "pick a runtime with one feature: tokio (the default), async-std, smol or embassy \
     (with --no-default-features)"
);

#[cfg(any(
    all(feature = "tokio", feature = "async-std"),
    all(feature = "tokio", feature = "smol"),
    all(feature = "tokio", feature = "embassy"),
    all(feature = "async-std", feature = "smol"),
    all(feature = "async-std", feature = "embassy"),
    all(feature = "smol", feature = "embassy"),
))]
compile_error!(
    "pick exactly one runtime: tokio, async-std, smol or embassy \
     (add --no-default-features to leave tokio out)"
);

/// A short request, to warm the process up.
const WARM_UP: Case = Case {
    name: "warm-up",
    latency: [ms(7); 3],
};

/// The application: handle seed 000's request twice, fast then slow, printing each step.
async fn app<T: Timer + Copy>(timer: T) {
    println!("runtime: {}", runtime::NAME);
    // A first request, not printed: a fresh process pays for its first pass through the code
    // and the runtime's first sleeps (page faults, lazy set-up) in milliseconds, which would
    // show in the first printed timeline.
    handle(timer, &WARM_UP, &mut |_| {}).await;
    for case in [&FAST, &SLOW] {
        handle(timer, case, &mut |line| println!("{line}")).await;
    }
}

#[cfg(feature = "tokio")]
mod runtime {
    pub(crate) const NAME: &str = "tokio";

    pub(crate) fn run() {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a tokio runtime")
            .block_on(super::app(deadline_tokio::TokioTimer));
    }
}

#[cfg(all(feature = "async-std", not(feature = "tokio")))]
mod runtime {
    pub(crate) const NAME: &str = "async-std (timer on async-io)";

    pub(crate) fn run() {
        async_std::task::block_on(super::app(deadline_std::AsyncIoTimer));
    }
}

#[cfg(all(feature = "smol", not(any(feature = "tokio", feature = "async-std"))))]
mod runtime {
    pub(crate) const NAME: &str = "smol (timer on async-io)";

    pub(crate) fn run() {
        smol::block_on(super::app(deadline_std::AsyncIoTimer));
    }
}

#[cfg(all(
    feature = "embassy",
    not(any(feature = "tokio", feature = "async-std", feature = "smol"))
))]
mod runtime {
    use std::sync::atomic::{AtomicBool, Ordering};

    pub(crate) const NAME: &str = "embassy (std platform, embassy-time std driver)";

    static DONE: AtomicBool = AtomicBool::new(false);

    #[embassy_executor::task]
    async fn serve() {
        super::app(deadline_embassy::EmbassyTimer).await;
        DONE.store(true, Ordering::Release);
    }

    pub(crate) fn run() {
        let executor = Box::leak(Box::new(embassy_executor::Executor::new()));
        executor.run_until(
            |spawner| spawner.spawn(serve().expect("the task is free")),
            || DONE.load(Ordering::Acquire),
        );
    }
}

fn main() {
    #[cfg(any(
        feature = "tokio",
        feature = "async-std",
        feature = "smol",
        feature = "embassy"
    ))]
    runtime::run();
}
