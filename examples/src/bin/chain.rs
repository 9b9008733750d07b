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
//!
//! The program checks how each request ended ([`check`]): both answered 200, the fast case
//! called A, B and C, the slow case skipped C. It exits with status 1, saying what differed,
//! on a mismatch. It does not check the printed times: a real timer drifts by a millisecond
//! or so, and the exact timeline is checked in virtual time by the crate's tests.

use std::process::ExitCode;

use deadline_core::{Timer, ms};
use deadline_examples::chain::{Case, FAST, SLOW, check, handle};

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
    expect: FAST.expect,
};

/// The application: handle seed 000's request twice, fast then slow, printing each step.
/// Returns whether every request ended as expected; says on stderr which did not.
async fn app<T: Timer + Copy>(timer: T) -> bool {
    println!("runtime: {}", runtime::NAME);
    let mut ok = true;
    // A first request, not printed: a fresh process pays for its first pass through the code
    // and the runtime's first sleeps (page faults, lazy set-up) in milliseconds, which would
    // show in the first printed timeline.
    for (case, print) in [(&WARM_UP, false), (&FAST, true), (&SLOW, true)] {
        let response = handle(timer, &mut runtime::rng(), case, &mut |line| {
            if print {
                println!("{line}");
            }
        })
        .await;
        if let Err(mismatch) = check(case, &response) {
            eprintln!("chain: {mismatch}");
            ok = false;
        }
    }
    ok
}

#[cfg(feature = "tokio")]
mod runtime {
    pub(crate) const NAME: &str = "tokio";

    /// The default random source, seeded from the operating system.
    pub(crate) fn rng() -> deadline_tokio::Entropy {
        deadline_tokio::Entropy
    }

    pub(crate) fn run() -> bool {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a tokio runtime")
            .block_on(super::app(deadline_tokio::TokioTimer))
    }
}

#[cfg(all(feature = "async-std", not(feature = "tokio")))]
mod runtime {
    pub(crate) const NAME: &str = "async-std (timer on async-io)";

    /// The default random source, seeded from the operating system.
    pub(crate) fn rng() -> deadline_std::Entropy {
        deadline_std::Entropy
    }

    pub(crate) fn run() -> bool {
        async_std::task::block_on(super::app(deadline_std::AsyncIoTimer))
    }
}

#[cfg(all(feature = "smol", not(any(feature = "tokio", feature = "async-std"))))]
mod runtime {
    pub(crate) const NAME: &str = "smol (timer on async-io)";

    /// The default random source, seeded from the operating system.
    pub(crate) fn rng() -> deadline_std::Entropy {
        deadline_std::Entropy
    }

    pub(crate) fn run() -> bool {
        smol::block_on(super::app(deadline_std::AsyncIoTimer))
    }
}

#[cfg(all(
    feature = "embassy",
    not(any(feature = "tokio", feature = "async-std", feature = "smol"))
))]
mod runtime {
    use std::sync::atomic::{AtomicBool, Ordering};

    pub(crate) const NAME: &str = "embassy (std platform, embassy-time std driver)";

    /// A generator seeded from the host's randomness (std's `RandomState`). On a
    /// microcontroller, seed it from the chip's hardware random number generator instead.
    pub(crate) fn rng() -> deadline_core::rng::SplitMix64 {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(NAME);
        deadline_core::rng::SplitMix64::new(seed)
    }

    static DONE: AtomicBool = AtomicBool::new(false);
    static OK: AtomicBool = AtomicBool::new(false);

    #[embassy_executor::task]
    async fn serve() {
        let ok = super::app(deadline_embassy::EmbassyTimer).await;
        OK.store(ok, Ordering::Release);
        DONE.store(true, Ordering::Release);
    }

    pub(crate) fn run() -> bool {
        let executor = Box::leak(Box::new(embassy_executor::Executor::new()));
        executor.run_until(
            |spawner| spawner.spawn(serve().expect("the task is free")),
            || DONE.load(Ordering::Acquire),
        );
        OK.load(Ordering::Acquire)
    }
}

fn main() -> ExitCode {
    #[cfg(any(
        feature = "tokio",
        feature = "async-std",
        feature = "smol",
        feature = "embassy"
    ))]
    if !runtime::run() {
        eprintln!("chain: a request did not end as seed 000 says (see above)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
