//! One time line for every std-based adapter: a deadline set on tokio's clock reads the same
//! time left on `deadline-std`'s, whichever clock was used first.
//!
//! This file is its own test binary, so its process starts with neither clock used. The
//! std clock is read first and tokio's only after std's clock has moved on by a millisecond
//! or more: with one origin per clock, taken at first use, the two would then disagree by
//! that much.

use std::time::Duration;

use deadline_core::{Clock, Deadline, ms};
use deadline_std::{StdClock, from_std};
use deadline_tokio::time::{TokioClock, from_tokio};
use deadline_tokio::{remaining, scope};

#[test]
fn a_deadline_crosses_from_tokio_to_std_with_the_same_time_left() {
    let first = std::time::Instant::now();
    let std_first = StdClock.now();
    // Let std's clock move on before tokio's is first read (bounded: a monotonic clock passes
    // a millisecond in a millisecond).
    while first.elapsed() < Duration::from_millis(2) {
        std::hint::spin_loop();
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        // The same real instant reads the same on both clocks, to the microsecond.
        let instant = std::time::Instant::now();
        assert_eq!(
            from_tokio(tokio::time::Instant::from_std(instant)),
            from_std(instant)
        );

        let deadline = Deadline::after(TokioClock.now(), ms(200));
        assert!(deadline.instant() > std_first);
        scope(deadline, async {
            let on_tokio = remaining().unwrap();
            // A blocking helper reads the deadline on deadline-std's clock, later.
            let on_std = tokio::task::spawn_blocking(move || deadline.remaining(StdClock.now()))
                .await
                .unwrap();
            assert!(
                on_std > Duration::ZERO,
                "the helper must not see the request as expired"
            );
            assert!(on_std <= on_tokio, "read later, so no more time left");
            assert!(on_tokio <= ms(200));
            // Read in the order std, tokio, std, the three instants are in that order.
            let a = StdClock.now();
            let b = TokioClock.now();
            let c = StdClock.now();
            assert!(a <= b && b <= c, "{a:?} {b:?} {c:?}");
        })
        .await
        .expect("inside its scope");
    });
}
