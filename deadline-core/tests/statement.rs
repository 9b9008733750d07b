//! The database statement timeout from the time left (the propagation model's database).

use core::time::Duration;

use deadline_core::statement::{
    MAX_STATEMENT_MILLIS, StatementDecision, StatementPolicy, statement_timeout,
};
use deadline_core::{Deadline, Error, Instant, ms};
use proptest::prelude::*;

/// The propagation model's `get_order`: at most 300 ms per query, and "don't start" under 40 ms
/// left. The model's database answers in no time: no margin.
const DATABASE: StatementPolicy = StatementPolicy::capped(ms(300))
    .with_floor(ms(40))
    .with_margin(Duration::ZERO);

fn millis(d: StatementDecision) -> Option<u32> {
    d.timeout().map(|t| t.millis())
}

#[test]
fn the_propagation_model_s_database_caps_at_300_ms_then_follows_the_time_left() {
    let deadline = Deadline::after(Instant::ZERO, ms(1000));
    let at = |t: u64| statement_timeout(&DATABASE, deadline, Instant::from_millis(t));
    // 1000 ms left: the cap.
    assert_eq!(millis(at(0)), Some(300));
    // 250 ms left: all of it.
    assert_eq!(millis(at(750)), Some(250));
    // Exactly the floor is still worth starting.
    assert_eq!(millis(at(960)), Some(40));
    // 39 ms left: under the floor, do not start.
    let StatementDecision::DontStart(s) = at(961) else {
        panic!("39 ms left must not start a query");
    };
    assert_eq!((s.available(), s.floor()), (ms(39), ms(40)));
    assert_eq!(
        s.error(),
        Error::InsufficientTime {
            available: ms(39),
            floor: ms(40)
        }
    );
}

#[test]
fn rounds_down_so_the_database_never_outlives_the_caller() {
    let deadline = Deadline::after(Instant::ZERO, ms(1000));
    // 100.999 ms left becomes 100 ms, not 101.
    let now = Instant::from_micros(899_001);
    let t = statement_timeout(&DATABASE, deadline, now)
        .timeout()
        .unwrap();
    assert_eq!(t.millis(), 100);
    assert!(now + t.as_duration() <= deadline.instant());
    assert_eq!(t.to_string(), "SET LOCAL statement_timeout = 100");
}

#[test]
fn never_zero_because_zero_means_no_timeout() {
    // No floor at all, and 0.5 ms left: PostgreSQL would read 0 as "wait forever".
    let policy = StatementPolicy::capped(ms(300)).with_floor(Duration::ZERO);
    let deadline = Deadline::after(Instant::ZERO, Duration::from_micros(500));
    let d = statement_timeout(&policy, deadline, Instant::ZERO);
    assert!(matches!(d, StatementDecision::DontStart(s) if s.error() != Error::DeadlineExceeded));
    // And past the deadline: nothing left, deadline exceeded.
    let d = statement_timeout(&policy, deadline, Instant::from_millis(1));
    assert!(matches!(d, StatementDecision::DontStart(s) if s.error() == Error::DeadlineExceeded));
}

#[test]
fn the_reserve_comes_off_the_time_left() {
    let policy = DATABASE.with_reserve(ms(15));
    let deadline = Deadline::after(Instant::ZERO, ms(100));
    // 100 - 15 = 85 ms.
    assert_eq!(
        millis(statement_timeout(&policy, deadline, Instant::ZERO)),
        Some(85)
    );
    // 54 - 15 = 39 ms: under the floor.
    assert!(matches!(
        statement_timeout(&policy, deadline, Instant::from_millis(46)),
        StatementDecision::DontStart(_)
    ));
}

#[test]
fn the_default_margin_ends_the_statement_5_ms_before_the_deadline() {
    let policy = StatementPolicy::capped(ms(300)).with_floor(ms(40));
    assert_eq!(policy.margin(), StatementPolicy::DEFAULT_MARGIN);
    assert_eq!(StatementPolicy::DEFAULT_MARGIN, ms(5));
    let deadline = Deadline::after(Instant::ZERO, ms(1000));
    let at = |t: u64| statement_timeout(&policy, deadline, Instant::from_millis(t));
    // Plenty left: the cap, the margin does not matter.
    assert_eq!(millis(at(0)), Some(300));
    // 250 ms left: 245 for the statement, 5 for its answer.
    assert_eq!(millis(at(750)), Some(245));
    // 45 ms left: 40, exactly the floor.
    assert_eq!(millis(at(955)), Some(40));
    // 44 ms left: 39, under the floor; the shortfall says so.
    let StatementDecision::DontStart(s) = at(956) else {
        panic!("39 ms after the margin must not start a query");
    };
    assert_eq!(
        (s.left(), s.available(), s.floor()),
        (ms(44), ms(39), ms(40))
    );
}

#[test]
fn the_margin_adds_to_the_reserve() {
    let policy = DATABASE.with_reserve(ms(15)).with_margin(ms(10));
    let deadline = Deadline::after(Instant::ZERO, ms(100));
    // 100 - 15 - 10 = 75 ms.
    assert_eq!(
        millis(statement_timeout(&policy, deadline, Instant::ZERO)),
        Some(75)
    );
    // 64 - 25 = 39 ms: under the floor.
    assert!(matches!(
        statement_timeout(&policy, deadline, Instant::from_millis(36)),
        StatementDecision::DontStart(_)
    ));
}

#[test]
fn a_huge_margin_saturates_to_do_not_start() {
    let policy = StatementPolicy::capped(ms(300))
        .with_floor(Duration::ZERO)
        .with_reserve(Duration::MAX)
        .with_margin(Duration::MAX);
    let deadline = Deadline::after(Instant::ZERO, ms(1000));
    let StatementDecision::DontStart(s) = statement_timeout(&policy, deadline, Instant::ZERO)
    else {
        panic!("no time is left after the margin");
    };
    assert_eq!((s.left(), s.available()), (ms(1000), Duration::ZERO));
    // Even with no deadline at all.
    let d = statement_timeout(&policy, Deadline::NEVER, Instant::ZERO);
    assert!(matches!(d, StatementDecision::DontStart(_)));
}

#[test]
fn a_deadline_that_never_comes_gets_the_cap() {
    let huge = StatementPolicy::capped(Duration::MAX).with_floor(ms(1));
    let d = statement_timeout(&huge, Deadline::NEVER, Instant::ZERO);
    assert_eq!(millis(d), Some(MAX_STATEMENT_MILLIS));
    let d = statement_timeout(&DATABASE, Deadline::NEVER, Instant::MAX);
    assert!(matches!(d, StatementDecision::DontStart(_)));
}

proptest! {
    #[test]
    fn set_timeouts_fit_the_time_left_the_cap_and_the_floor(
        deadline in any::<u64>(),
        now in any::<u64>(),
        cap in any::<u64>(),
        floor in 0u64..10_000_000,
        reserve in 0u64..10_000_000,
        margin in prop_oneof![0u64..100_000, any::<u64>()],
    ) {
        let policy = StatementPolicy::capped(Duration::from_micros(cap)).with_floor(Duration::from_micros(floor))
            .with_reserve(Duration::from_micros(reserve))
            .with_margin(Duration::from_micros(margin));
        let deadline = Deadline::at(Instant::from_micros(deadline));
        let now = Instant::from_micros(now);
        let left = deadline
            .remaining(now)
            .saturating_sub(policy.reserve())
            .saturating_sub(policy.margin());
        match statement_timeout(&policy, deadline, now) {
            StatementDecision::Set(t) => {
                let d = t.as_duration();
                prop_assert!(t.millis() >= 1);
                prop_assert!(d <= left);
                prop_assert!(d <= policy.cap());
                // At least the floor, up to the rounding to whole milliseconds.
                prop_assert!(d + ms(1) > policy.floor());
                prop_assert!(now + d + policy.reserve() + policy.margin() <= deadline.instant());
            }
            StatementDecision::DontStart(s) => {
                prop_assert!(s.available() < policy.floor() || s.available() < ms(1));
                prop_assert!(s.available() <= left);
            }
        }
    }
}

proptest! {
    /// What is left of a statement timeout for its run never runs out before the whole
    /// timeout would have: the instant a runtime was told the statement runs out from, before
    /// which its error is not read as its time running out (rounded down, a run set 0.3 ms
    /// after the decision ended up to 0.7 ms early, and its 57014 came back as a failure of
    /// the database). It ends within a millisecond after, and only a spent timeout leaves
    /// nothing.
    #[test]
    fn the_rest_of_a_timeout_never_runs_out_before_the_whole(
        millis in 1u32..=MAX_STATEMENT_MILLIS,
        decided in 0u64..1 << 50,
        after in 0u64..1 << 42,
    ) {
        let decided = Instant::from_micros(decided);
        let policy = StatementPolicy::capped(ms(u64::from(millis))).with_floor(ms(1));
        let timeout = statement_timeout(&policy, Deadline::NEVER, decided).timeout().unwrap();
        prop_assert_eq!(timeout.millis(), millis);
        let now = Instant::from_micros(decided.as_micros() + after);
        let end = timeout.running_out_from(decided);
        // A reading before the decision is taken as the decision: the whole timeout, which
        // fits PostgreSQL's largest.
        let before = Instant::from_micros(decided.as_micros().saturating_sub(after));
        prop_assert_eq!(timeout.left_at(decided, before), Some(timeout));
        match timeout.left_at(decided, now) {
            Some(rest) => {
                prop_assert!(now < end);
                prop_assert!(rest.running_out_from(now) >= end);
                prop_assert!(rest.running_out_from(now) < end + ms(1));
                prop_assert_eq!(timeout.left_at_or_shortest(decided, now), rest);
            }
            None => {
                prop_assert!(now >= end);
                prop_assert_eq!(timeout.left_at_or_shortest(decided, now).millis(), 1);
            }
        }
    }
}

/// What a failed statement answers its caller, by SQLSTATE: the request at fault, a clash
/// with another transaction, the database out of reach, or the service failing.
#[test]
fn a_failed_statement_answers_by_its_sqlstate() {
    use deadline_core::statement::grpc_code_of_sqlstate;
    use deadline_core::wire::GrpcCode;

    for (sqlstate, code, http) in [
        (&b"23505"[..], GrpcCode::AlreadyExists, 409), // unique violation
        (b"23P01", GrpcCode::AlreadyExists, 409),      // exclusion violation
        (b"23503", GrpcCode::FailedPrecondition, 400), // foreign key
        (b"23502", GrpcCode::FailedPrecondition, 400), // not null
        (b"22012", GrpcCode::InvalidArgument, 400),    // division by zero
        (b"22P02", GrpcCode::InvalidArgument, 400),    // not a number
        (b"40001", GrpcCode::Aborted, 409),            // serialization failure
        (b"40P01", GrpcCode::Aborted, 409),            // deadlock
        (b"08006", GrpcCode::Unavailable, 503),        // connection failure
        (b"53300", GrpcCode::Unavailable, 503),        // too many connections
        (b"57P01", GrpcCode::Unavailable, 503),        // admin shutdown
        (b"57P03", GrpcCode::Unavailable, 503),        // cannot connect now
        (b"08P01", GrpcCode::Internal, 500),           // protocol violation: a bind short
        (b"2200H", GrpcCode::Internal, 500),           // sequence used up
        (b"22P03", GrpcCode::Internal, 500),           // bad binary parameter
        (b"22P04", GrpcCode::Internal, 500),           // bad COPY data
        (b"57014", GrpcCode::Internal, 500),           // cancelled, not by its timeout
        (b"42P01", GrpcCode::Internal, 500),           // no such table
        (b"XX000", GrpcCode::Internal, 500),           // internal error
        (b"", GrpcCode::Internal, 500),
    ] {
        let name = String::from_utf8_lossy(sqlstate);
        assert_eq!(grpc_code_of_sqlstate(Some(sqlstate)), code, "{name}");
        assert_eq!(code.connect_http_status(), http, "{name}");
    }
    assert_eq!(grpc_code_of_sqlstate(None), GrpcCode::Internal);
}

/// What a failed statement means for a retry: run again only what provably did nothing (a
/// rolled-back clash, a connection never made); a failure that may have run is a plain
/// failure; the request at fault is final; the service's fault is held against the
/// dependency.
#[test]
fn a_failed_statement_is_retried_by_what_its_sqlstate_says() {
    use deadline_core::Outcome;
    use deadline_core::statement::outcome_of_sqlstate;

    for (sqlstate, outcome) in [
        (&b"40001"[..], Outcome::Refused), // serialization failure: rolled back
        (b"40P01", Outcome::Refused),      // deadlock: rolled back
        (b"08001", Outcome::Refused),      // no connection made
        (b"08004", Outcome::Refused),      // the server refused the connection
        (b"53300", Outcome::Refused),      // too many connections
        (b"57P03", Outcome::Refused),      // the server starting
        (b"08006", Outcome::Failed),       // the connection lost
        (b"08003", Outcome::Failed),       // no connection any more
        (b"53200", Outcome::Failed),       // out of memory
        (b"57P01", Outcome::Failed),       // admin shutdown
        (b"57P02", Outcome::Failed),       // crash shutdown
        (b"57014", Outcome::Failed),       // cancelled, not by its timeout
        (b"23505", Outcome::Fatal),        // unique violation
        (b"23503", Outcome::Fatal),        // foreign key
        (b"22012", Outcome::Fatal),        // division by zero
        (b"08P01", Outcome::Broken),       // protocol violation: the service's fault
        (b"2200H", Outcome::Broken),       // sequence used up
        (b"42P01", Outcome::Broken),       // no such table
        (b"42601", Outcome::Broken),       // syntax error
        (b"XX000", Outcome::Broken),       // internal error
        (b"", Outcome::Broken),
    ] {
        let name = String::from_utf8_lossy(sqlstate);
        assert_eq!(outcome_of_sqlstate(Some(sqlstate)), outcome, "{name}");
    }
    assert_eq!(outcome_of_sqlstate(None), Outcome::Failed);
}
