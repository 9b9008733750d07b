//! Admission control: shed at the edge when the queue has eaten the budget.

use core::time::Duration;

use deadline_core::wire::Admission;
use deadline_core::wire::GrpcCode;
use deadline_core::{Deadline, Error, Instant, ms};

#[test]
fn admitted_exactly_when_the_time_left_covers_the_need() {
    let need = ms(20);
    let admission = Admission::new(need);
    let sent_with = ms(100);
    let deadline = Deadline::after(Instant::ZERO, sent_with);
    // Queued for exactly `sent_with - need`: the time left equals the need.
    let boundary = Instant::ZERO + (sent_with - need);
    assert_eq!(admission.admit(deadline, boundary), Ok(need));
    // One microsecond later it no longer fits.
    let late = boundary + Duration::from_micros(1);
    assert_eq!(admission.admit(deadline, late), Err(Error::Shed));
    // Earlier, it is admitted with what is left.
    assert_eq!(
        admission.admit(deadline, Instant::from_millis(30)),
        Ok(sent_with - ms(30))
    );
}

#[test]
fn an_expired_request_is_deadline_exceeded_even_when_nothing_is_needed() {
    // Refused whatever the rule, and as the deadline's (504), not as load (503): its caller
    // has stopped waiting, and no other replica can do better.
    for admission in [Admission::DEFAULT, Admission::new(ms(20))] {
        let deadline = Deadline::after(Instant::from_millis(10), ms(5));
        let expired = Err(Error::DeadlineExceeded);
        assert_eq!(admission.admit(deadline, Instant::from_millis(15)), expired);
        assert_eq!(admission.admit(deadline, Instant::MAX), expired);
    }
    let deadline = Deadline::after(Instant::from_millis(10), ms(5));
    assert!(
        Admission::DEFAULT
            .admit(deadline, Instant::from_millis(14))
            .is_ok()
    );
}

#[test]
fn a_request_without_a_deadline_is_admitted() {
    let admission = Admission::new(ms(1_000));
    assert!(
        admission
            .admit(Deadline::NEVER, Instant::from_secs(1_000))
            .is_ok()
    );
}

#[test]
fn the_queue_delay_threshold_sheds_a_long_wait_even_with_time_left() {
    let max = ms(50);
    let admission = Admission::new(ms(5)).with_max_queue_delay(max);
    let enqueued = Instant::from_millis(1_000);
    let deadline = Deadline::after(enqueued, ms(10_000));
    assert!(
        admission
            .admit_queued(deadline, enqueued, enqueued + max)
            .is_ok()
    );
    let over = enqueued + max + Duration::from_micros(1);
    assert_eq!(
        admission.admit_queued(deadline, enqueued, over),
        Err(Error::Shed)
    );
    // The rule on the time left alone does not look at the queue.
    assert!(admission.admission().admit(deadline, over).is_ok());
    // A clock reading before the enqueue instant counts as no wait.
    assert!(
        admission
            .admit_queued(deadline, enqueued, Instant::ZERO)
            .is_ok()
    );
}

/// A request whose deadline has passed while it waited too long in the queue is the
/// deadline's (504, `DEADLINE_EXCEEDED`: no other replica can do better), not shed (503,
/// `UNAVAILABLE`, which invites a retry elsewhere), as `Admission::admit` rules.
#[test]
fn a_queued_request_past_its_deadline_is_answered_as_the_deadline() {
    let admission = Admission::new(ms(5)).with_max_queue_delay(ms(50));
    let enqueued = Instant::from_millis(1_000);
    let deadline = Deadline::after(enqueued, ms(40));
    let now = enqueued + ms(60);
    assert_eq!(
        admission.admit_queued(deadline, enqueued, now),
        Err(Error::DeadlineExceeded)
    );
    // Too little time left, and waited too long: shed, either way.
    let deadline = Deadline::after(enqueued, ms(62));
    assert_eq!(
        admission.admit_queued(deadline, enqueued, now),
        Err(Error::Shed)
    );
}

#[test]
fn a_shed_request_is_answered_503_or_unavailable() {
    let admission = Admission::new(ms(20));
    let deadline = Deadline::after(Instant::ZERO, ms(10));
    let err = admission.admit(deadline, Instant::ZERO).unwrap_err();
    assert_eq!(err, Error::Shed);
    assert_eq!(err.http_status(), 503);
    assert_eq!(err.grpc_code(), GrpcCode::Unavailable);
    assert!(!err.is_deadline(), "shedding is overload, not a deadline");
}
