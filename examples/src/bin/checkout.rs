//! The checkout example on the one-line call site, on every runtime compiled in: one
//! application module (`deadline_examples::checkout`'s `app.rs`), built against each
//! runtime's `Rt`, run here for the fast and the slow case.
//!
//! ```text
//! cargo run -p deadline-examples --bin checkout                                   # tokio, plain threads
//! cargo run -p deadline-examples --bin checkout --features async-std,smol,embassy # and the rest
//! ```
//!
//! tokio runs on paused (virtual) time, where each page must be exactly the worked example's:
//! every call gets its cap, and in the slow case C, which would have 24 ms for a 25 ms floor,
//! is skipped. The others run on their real timers, where a busy machine wakes a sleep late
//! and the later calls have less time left: there each page must hold the same decisions (the
//! same calls made, C skipped in the slow case), and each timeout at most the exact one and
//! never under its call's floor. The program exits with status 1 when a page differs from
//! that.

use std::process::ExitCode;
use std::time::Duration;

use deadline_core::ms;
use deadline_examples::chain::{FAST, SLOW};
use deadline_examples::checkout::Page;

/// The page each case must give, whatever the runtime.
const EXPECT: [Page; 2] = [
    Page {
        profile: ms(50),
        price: ms(110),
        recommendations: Some(ms(60)),
    },
    Page {
        profile: ms(50),
        price: ms(110),
        recommendations: None,
    },
];

/// `d` in whole milliseconds, rounded to the nearest.
fn millis(d: Duration) -> u128 {
    d.as_micros().saturating_add(500) / 1000
}

/// How a runtime keeps time in this program.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Time {
    /// Paused: the page is exact.
    Virtual,
    /// The runtime's own timer: late wake-ups only ever shorten a later call's timeout.
    Real,
}

/// Each call's floor (A, B, C), from the application module's policies.
fn floors() -> [Duration; 3] {
    use deadline_examples::checkout::on_blocking::app::{A, B, C};
    [&A, &B, &C].map(|dependency| dependency.policy().floor())
}

/// Whether `page` is what `expect` allows on `time`: the exact page on virtual time; on real
/// time, the same calls made or skipped, each timeout at most the exact one and at least the
/// call's floor.
fn fits(page: &Page, expect: &Page, time: Time) -> bool {
    if time == Time::Virtual {
        return page == expect;
    }
    let [a, b, c] = floors();
    let within = |got: Duration, exact: Duration, floor: Duration| floor <= got && got <= exact;
    within(page.profile, expect.profile, a)
        && within(page.price, expect.price, b)
        && match (page.recommendations, expect.recommendations) {
            (Some(got), Some(exact)) => within(got, exact, c),
            (None, None) => true,
            _ => false,
        }
}

/// Prints one case's page and says whether it is the expected one.
fn report(runtime: &str, case: &str, got: Result<Page, String>, expect: Page, time: Time) -> bool {
    match got {
        Ok(page) => {
            let c = page
                .recommendations
                .map_or_else(|| "skipped".to_owned(), |t| format!("{} ms", millis(t)));
            println!(
                "{runtime:>10}  {case}: A {} ms, B {} ms, C {c}",
                millis(page.profile),
                millis(page.price)
            );
            let ok = fits(&page, &expect, time);
            if !ok {
                match time {
                    Time::Virtual => eprintln!("checkout: {runtime}, {case}: expected {expect:?}"),
                    Time::Real => eprintln!(
                        "checkout: {runtime}, {case}: expected the calls of {expect:?}, each \
                         timeout at most that one and at least its floor"
                    ),
                }
            }
            ok
        }
        Err(e) => {
            eprintln!("checkout: {runtime}, {case}: the request failed: {e}");
            false
        }
    }
}

/// Runs both cases with `run` and reports them.
fn both(
    runtime: &str,
    time: Time,
    mut run: impl FnMut([Duration; 3]) -> Result<Page, String>,
) -> bool {
    let mut ok = true;
    for (case, expect) in [FAST, SLOW].iter().zip(EXPECT) {
        ok &= report(runtime, case.name, run(case.latency), expect, time);
    }
    ok
}

#[cfg(feature = "tokio")]
fn tokio_paused() -> bool {
    use deadline_examples::checkout::on_tokio::app;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
    both("tokio", Time::Virtual, |latency| {
        runtime
            .block_on(app::request(latency))
            .map_err(|e| e.to_string())
    })
}

#[cfg(feature = "async-std")]
fn async_std() -> bool {
    use deadline_examples::checkout::on_async_io::app;
    both("async-std", Time::Real, |latency| {
        async_std::task::block_on(app::request(latency)).map_err(|e| e.to_string())
    })
}

#[cfg(feature = "smol")]
fn smol() -> bool {
    use deadline_examples::checkout::on_async_io::app;
    both("smol", Time::Real, |latency| {
        smol::block_on(app::request(latency)).map_err(|e| e.to_string())
    })
}

fn blocking() -> bool {
    use deadline_examples::checkout::on_blocking::app;
    both("threads", Time::Real, |latency| {
        deadline_std::Blocking::block_on(app::request(latency)).map_err(|e| e.to_string())
    })
}

#[cfg(feature = "embassy")]
mod on_embassy {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use deadline_examples::chain::{FAST, SLOW};
    use deadline_examples::checkout::on_embassy::app;

    use super::Page;

    static DONE: AtomicBool = AtomicBool::new(false);
    static PAGES: Mutex<Vec<Result<Page, String>>> = Mutex::new(Vec::new());

    #[embassy_executor::task]
    async fn serve() {
        for case in [FAST, SLOW] {
            let page = app::request(case.latency).await.map_err(|e| e.to_string());
            PAGES.lock().expect("not poisoned").push(page);
        }
        DONE.store(true, Ordering::Release);
    }

    pub(super) fn run() -> bool {
        let executor = Box::leak(Box::new(embassy_executor::Executor::new()));
        executor.run_until(
            |spawner| spawner.spawn(serve().expect("the task is free")),
            || DONE.load(Ordering::Acquire),
        );
        let mut pages = PAGES
            .lock()
            .expect("not poisoned")
            .drain(..)
            .collect::<Vec<_>>();
        pages.reverse();
        super::both("embassy", super::Time::Real, |_| {
            pages.pop().unwrap_or_else(|| Err("no page".into()))
        })
    }
}

fn main() -> ExitCode {
    let mut ok = true;
    #[cfg(feature = "tokio")]
    {
        ok &= tokio_paused();
    }
    #[cfg(feature = "async-std")]
    {
        ok &= async_std();
    }
    #[cfg(feature = "smol")]
    {
        ok &= smol();
    }
    ok &= blocking();
    #[cfg(feature = "embassy")]
    {
        ok &= on_embassy::run();
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
