//! The one-line call on std: on plain threads (`Blocking`) and on async-std and smol
//! (`AsyncIo`), with the current deadline in a thread-local. Real clocks: nothing here
//! asserts a duration, only the decisions and what each attempt saw.

use std::panic::{AssertUnwindSafe, catch_unwind};

use deadline_core::policy::Backoff;
use deadline_core::runtime::{Runtime, ThreadDeadline, remaining, scope_timeout};
use deadline_core::{Deadline, Dependency, Instant, Policy, ms};
use deadline_std::{AsyncIo, Blocking};

static ON_THREADS: Dependency<Blocking> = Dependency::new(
    Policy::required("threads")
        .idempotent()
        .with_cap(ms(100))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(1))),
);

static ON_ASYNC_IO: Dependency<AsyncIo> = Dependency::new(
    Policy::required("async-io")
        .idempotent()
        .with_cap(ms(100))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(1))),
);

#[test]
fn a_retried_call_on_plain_threads() {
    let mut tries = 0;
    let seen = Blocking::block_on(scope_timeout::<Blocking, _>(ms(5_000), async {
        ON_THREADS
            .run(|limits| {
                tries += 1;
                let left = remaining::<Blocking>().expect("inside the attempt's scope");
                let first = tries == 1;
                async move {
                    if first {
                        Err("503")
                    } else {
                        Ok((left, limits.timeout()))
                    }
                }
            })
            .await
    }));
    let (left, timeout) = seen.expect("inside its scope").unwrap();
    // The attempt's deadline, not the request's 5 s.
    assert!(
        left <= timeout && timeout <= ms(100),
        "{left:?} {timeout:?}"
    );
    assert_eq!(ON_THREADS.counters().snapshot().retries, 1);
    assert_eq!(Blocking::current(), None);
}

#[test]
fn a_retried_call_on_smol_and_async_std() {
    for run in [(|f| smol::block_on(f)) as fn(_) -> _, |f| {
        async_std::task::block_on(f)
    }] {
        let mut tries = 0;
        let seen = run(Box::pin(scope_timeout::<AsyncIo, _>(
            ms(5_000),
            async move {
                ON_ASYNC_IO
                    .run(|limits| {
                        tries += 1;
                        let first = tries == 1;
                        async move {
                            let left = remaining::<AsyncIo>().expect("inside the attempt's scope");
                            if first {
                                Err("503")
                            } else {
                                Ok((left, limits.timeout()))
                            }
                        }
                    })
                    .await
            },
        )));
        let (left, timeout) = seen.expect("inside its scope").unwrap();
        assert!(
            left <= timeout && timeout <= ms(100),
            "{left:?} {timeout:?}"
        );
    }
    assert_eq!(ON_ASYNC_IO.counters().snapshot().retries, 2);
}

#[test]
fn the_thread_deadline_is_put_back_after_a_panic() {
    let d = Deadline::after(Instant::ZERO, ms(10));
    let outer = Deadline::after(Instant::ZERO, ms(50));
    ThreadDeadline::enter(outer, || {
        let caught = catch_unwind(AssertUnwindSafe(|| {
            ThreadDeadline::enter(d, || {
                assert_eq!(ThreadDeadline::current(), Some(d));
                panic!("the handler panicked");
            })
        }));
        assert!(caught.is_err());
        assert_eq!(ThreadDeadline::current(), Some(outer));
    });
    assert_eq!(ThreadDeadline::current(), None);
}
