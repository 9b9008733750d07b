//! What a response means for retrying and for the dependency's breaker, row by row
//! (`ResponseHead::classify`): the server's answer is final and healthy, a failure a retry
//! may fix is retried and held against the dependency, a failure a retry would not fix is
//! not retried but held against it all the same.

use deadline_core::Outcome;
use deadline_core::breaker::BreakerOutcome;
use deadline_core::wire::{Protocol, ResponseHead};

/// A plain HTTP response of `status`.
fn http(status: u16) -> Option<Outcome> {
    ResponseHead::read(status, |_| None).classify()
}

/// A gRPC response whose head says `grpc-status: code`.
fn grpc(code: &'static [u8]) -> Option<Outcome> {
    ResponseHead::read(200, |name| match name {
        "content-type" => Some(&b"application/grpc"[..]),
        "grpc-status" => Some(code),
        _ => None,
    })
    .classify()
}

#[test]
fn each_http_status_reads_as_its_row() {
    for status in [200, 204, 302, 404] {
        let expected = (status == 404).then_some(Outcome::Fatal);
        assert_eq!(http(status), expected, "{status}");
    }
    for (status, expected) in [
        (400, Outcome::Fatal),
        (408, Outcome::Failed),
        (429, Outcome::Failed),
        (500, Outcome::Failed),
        (501, Outcome::Fatal),
        (502, Outcome::Failed),
        (503, Outcome::Failed),
        (504, Outcome::TimedOut),
        (505, Outcome::Fatal),
        (507, Outcome::Broken),
        (511, Outcome::Broken),
        (520, Outcome::Broken),
        (599, Outcome::Broken),
    ] {
        assert_eq!(http(status), Some(expected), "{status}");
    }
    // A Connect unary request's 500 is its `unknown`, `internal` or `data_loss`.
    let connect = ResponseHead::read(500, |_| None).for_request(Protocol::ConnectUnary);
    assert_eq!(connect.classify(), Some(Outcome::Broken));
    let unimplemented = ResponseHead::read(501, |_| None).for_request(Protocol::ConnectUnary);
    assert_eq!(unimplemented.classify(), Some(Outcome::Fatal));
    // Its `canceled`, as gRPC's `CANCELLED`; a plain 499 is a 4xx like any other.
    let canceled = ResponseHead::read(499, |_| None).for_request(Protocol::ConnectUnary);
    assert_eq!(canceled.classify(), Some(Outcome::Failed));
    assert_eq!(http(499), Some(Outcome::Fatal));
}

#[test]
fn each_grpc_status_reads_as_its_row() {
    assert_eq!(grpc(b"0"), None);
    for (code, expected) in [
        (&b"1"[..], Outcome::Failed), // CANCELLED: cut short
        (b"2", Outcome::Broken),      // UNKNOWN
        (b"3", Outcome::Fatal),       // INVALID_ARGUMENT
        (b"4", Outcome::TimedOut),    // DEADLINE_EXCEEDED
        (b"5", Outcome::Fatal),       // NOT_FOUND
        (b"8", Outcome::Failed),      // RESOURCE_EXHAUSTED
        (b"12", Outcome::Fatal),      // UNIMPLEMENTED
        (b"13", Outcome::Broken),     // INTERNAL
        (b"14", Outcome::Failed),     // UNAVAILABLE
        (b"15", Outcome::Broken),     // DATA_LOSS
        (b"16", Outcome::Fatal),      // UNAUTHENTICATED
        (b"banana", Outcome::Broken), // not a code: tonic reads it as UNKNOWN
    ] {
        assert_eq!(
            grpc(code),
            Some(expected),
            "{}",
            String::from_utf8_lossy(code)
        );
    }
}

#[test]
fn a_failure_a_retry_would_not_fix_is_the_dependencys_failure_and_an_answer_is_not() {
    assert_eq!(
        BreakerOutcome::of_attempt(Outcome::Broken),
        BreakerOutcome::Failure
    );
    assert_eq!(
        BreakerOutcome::of_attempt(Outcome::Fatal),
        BreakerOutcome::Success
    );
}
