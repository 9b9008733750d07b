//! `Blocking::block_on` with work that waits on another thread: a scope around it answers
//! when the work does, and still cuts it off at the deadline.
//!
//! Real threads and a real clock; nothing asserts a duration. The other thread answers as
//! soon as it is asked; the scopes' 5 s bound only a machine too loaded to let it.

use deadline_core::runtime::scope_timeout;
use deadline_core::{Clock, Error, Timer, ms};
use deadline_std::{Blocking, ThreadTimer};

#[test]
fn a_scope_answers_when_work_on_another_thread_does() {
    let (ask, asked) = smol::channel::bounded::<()>(1);
    let (answer, answered) = smol::channel::bounded(1);
    let helper = std::thread::spawn(move || {
        asked.recv_blocking().unwrap();
        answer.send_blocking(42).unwrap();
    });
    let got = Blocking::block_on(scope_timeout::<Blocking, _>(ms(5_000), async {
        ask.send(()).await.unwrap();
        answered.recv().await.unwrap()
    }));
    helper.join().unwrap();
    assert_eq!(got, Ok(42));
}

#[test]
fn a_scope_still_cuts_off_work_that_outlives_it() {
    let never = async {
        let t = ThreadTimer;
        t.sleep_until(t.now() + ms(3_600_000)).await;
    };
    let cut = Blocking::block_on(scope_timeout::<Blocking, _>(ms(20), never));
    assert_eq!(cut, Err(Error::DeadlineExceeded));
}

/// A future that, in its first poll, wakes itself and then parks the thread (as a
/// `std::sync::mpsc` receive inside the poll may): the park takes the unpark token the wake
/// left, and only the wake-up itself is left to say the future should be polled again.
struct WakesThenParks {
    polls: u32,
}

impl core::future::Future for WakesThenParks {
    type Output = u32;

    fn poll(
        mut self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<u32> {
        self.polls += 1;
        if self.polls > 1 {
            return core::task::Poll::Ready(self.polls);
        }
        cx.waker().wake_by_ref();
        // The token the wake left makes this return at once.
        std::thread::park();
        core::task::Poll::Pending
    }
}

#[test]
fn a_wake_up_during_the_poll_is_not_lost_to_a_park_inside_it() {
    // A watchdog unparks the thread if it is still waiting after 5 s (only a machine too
    // loaded to run the second poll, which follows at once, takes that long) and says so.
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let rescued = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let runner = std::thread::current();
    let watchdog = {
        let rescued = std::sync::Arc::clone(&rescued);
        std::thread::spawn(move || {
            if finished
                .recv_timeout(std::time::Duration::from_secs(5))
                .is_err()
            {
                rescued.store(true, std::sync::atomic::Ordering::SeqCst);
                runner.unpark();
            }
        })
    };
    let polls = Blocking::block_on(WakesThenParks { polls: 0 });
    done.send(()).unwrap();
    watchdog.join().unwrap();
    assert_eq!(polls, 2);
    assert!(
        !rescued.load(std::sync::atomic::Ordering::SeqCst),
        "block_on slept through the wake-up that came during the poll"
    );
}
