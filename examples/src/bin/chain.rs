//! The checkout example's A -> B -> C chain on a real runtime, with the dependencies
//! simulated: the fast case, then the slow case.
//!
//! By default it runs on virtual time: the core's `ManualTimer`, driven on the runtime's own
//! executor, moves its clock straight to the next sleep, so the run is instant and the
//! timeline is exact, the worked example's to the millisecond (response at 160 ms; C skipped
//! at 156 ms, response at 176 ms). With `--real-time` it runs on the runtime's own timer,
//! where a busy machine makes the times drift by a millisecond or more.
//!
//! The same program runs on every runtime; one feature flag picks it:
//!
//! ```text
//! cargo run -p deadline-examples --bin chain                                         # tokio
//! cargo run -p deadline-examples --bin chain -- --real-time                          # tokio's timer
//! cargo run -p deadline-examples --bin chain --no-default-features --features async-std
//! cargo run -p deadline-examples --bin chain --no-default-features --features smol
//! cargo run -p deadline-examples --bin chain --no-default-features --features embassy
//! ```
//!
//! Only the `runtime` module below differs per runtime; the application code is generic over
//! the core's `Timer`.
//!
//! The program checks how each request ended ([`check`]): both answered 200, the fast case
//! called A, B and C, the slow case skipped C; on virtual time, also the instant each response
//! went out. It exits with status 1, saying what differed, on a mismatch. On real time it does
//! not check the times: a real timer drifts, and the decisions hold whatever the drift (see
//! [`check`]).

use std::process::ExitCode;
use std::time::Duration;

use deadline_core::virtual_time::ManualTimer;
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

/// Which clock the program runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Time {
    /// The core's `ManualTimer` on the runtime's executor: instant, and exact.
    Virtual,
    /// The runtime's own timer (`--real-time`).
    Real,
}

/// The instant each printed case's response goes out, from its arrival, in the worked
/// example: what a virtual-time run must print.
const EXACT: [Duration; 2] = [ms(160), ms(176)];

/// The application: handle the checkout example's request twice, fast then slow, printing
/// each step. Returns whether every request ended as expected; says on stderr which did not.
async fn app<T: Timer + Copy>(timer: T, time: Time) -> bool {
    println!("runtime: {}", runtime::NAME);
    match time {
        Time::Virtual => println!(
            "time: virtual (the core's ManualTimer on the runtime's executor): instant, and exact \
             to the millisecond; --real-time runs on the runtime's own timer"
        ),
        Time::Real => println!(
            "time: real (the runtime's own timer): a busy machine makes the times drift; \
             without --real-time the run is on virtual time, and exact"
        ),
    }
    let mut ok = true;
    // On real time, a first request, not printed: a fresh process pays for its first pass
    // through the code and the runtime's first sleeps (page faults, lazy set-up) in
    // milliseconds, which would show in the first printed timeline.
    let warm_up = (time == Time::Real).then_some((&WARM_UP, false, None));
    let printed = [(&FAST, true, Some(EXACT[0])), (&SLOW, true, Some(EXACT[1]))];
    for (case, print, exact) in warm_up.into_iter().chain(printed) {
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
        if let (Time::Virtual, Some(at)) = (time, exact) {
            if response.at != at {
                eprintln!(
                    "chain: {}: the response went out at {:?} of virtual time, not {at:?}",
                    case.name, response.at
                );
                ok = false;
            }
        }
    }
    ok
}

/// Usage, for `--help` and for a wrong argument.
const USAGE: &str = "usage: chain [--real-time]\n  runs the checkout example on virtual time \
                     (instant and exact), or with --real-time on the runtime's own timer";

/// The program's one option: `--real-time`, or nothing. `Ok(None)` for `--help`.
fn time_from_args() -> Result<Option<Time>, String> {
    let mut time = Time::Virtual;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--real-time" => time = Time::Real,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("chain: unknown argument `{other}`\n{USAGE}")),
        }
    }
    Ok(Some(time))
}

#[cfg(feature = "tokio")]
mod runtime {
    pub(crate) const NAME: &str = "tokio";

    /// The default random source, seeded from the operating system.
    pub(crate) fn rng() -> deadline_tokio::Entropy {
        deadline_tokio::Entropy
    }

    pub(crate) fn run(time: super::Time) -> bool {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a tokio runtime");
        match time {
            super::Time::Real => {
                runtime.block_on(super::app(deadline_tokio::time::TokioTimer, time))
            }
            super::Time::Virtual => {
                let timer = super::ManualTimer::new();
                runtime.block_on(timer.advancing(super::app(&timer, time)))
            }
        }
    }
}

#[cfg(all(feature = "async-std", not(feature = "tokio")))]
mod runtime {
    pub(crate) const NAME: &str = "async-std (timer on async-io)";

    /// The default random source, seeded from the operating system.
    pub(crate) fn rng() -> deadline_std::Entropy {
        deadline_std::Entropy
    }

    pub(crate) fn run(time: super::Time) -> bool {
        match time {
            super::Time::Real => {
                async_std::task::block_on(super::app(deadline_std::AsyncIoTimer, time))
            }
            super::Time::Virtual => {
                let timer = super::ManualTimer::new();
                async_std::task::block_on(timer.advancing(super::app(&timer, time)))
            }
        }
    }
}

#[cfg(all(feature = "smol", not(any(feature = "tokio", feature = "async-std"))))]
mod runtime {
    pub(crate) const NAME: &str = "smol (timer on async-io)";

    /// The default random source, seeded from the operating system.
    pub(crate) fn rng() -> deadline_std::Entropy {
        deadline_std::Entropy
    }

    pub(crate) fn run(time: super::Time) -> bool {
        match time {
            super::Time::Real => smol::block_on(super::app(deadline_std::AsyncIoTimer, time)),
            super::Time::Virtual => {
                let timer = super::ManualTimer::new();
                smol::block_on(timer.advancing(super::app(&timer, time)))
            }
        }
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

    use super::{ManualTimer, Time};

    static DONE: AtomicBool = AtomicBool::new(false);
    static OK: AtomicBool = AtomicBool::new(false);
    /// The virtual-time timer: a task runs for as long as the executor, so it is a static.
    static VIRTUAL: ManualTimer = ManualTimer::new();

    #[embassy_executor::task]
    async fn serve(time: Time) {
        let ok = match time {
            Time::Real => super::app(deadline_embassy::EmbassyTimer, time).await,
            Time::Virtual => VIRTUAL.advancing(super::app(&VIRTUAL, time)).await,
        };
        OK.store(ok, Ordering::Release);
        DONE.store(true, Ordering::Release);
    }

    pub(crate) fn run(time: Time) -> bool {
        let executor = Box::leak(Box::new(embassy_executor::Executor::new()));
        executor.run_until(
            |spawner| spawner.spawn(serve(time).expect("the task is free")),
            || DONE.load(Ordering::Acquire),
        );
        OK.load(Ordering::Acquire)
    }
}

fn main() -> ExitCode {
    let time = match time_from_args() {
        Ok(Some(time)) => time,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    #[cfg(any(
        feature = "tokio",
        feature = "async-std",
        feature = "smol",
        feature = "embassy"
    ))]
    if !runtime::run(time) {
        eprintln!("chain: a request did not end as the worked example says (see above)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
