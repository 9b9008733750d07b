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
