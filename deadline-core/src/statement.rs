//! The database statement timeout, from the time left; what a failed statement answers its
//! caller ([`grpc_code_of_sqlstate`]), and what it means for a retry ([`outcome_of_sqlstate`]).

use core::fmt;
use core::time::Duration;

use crate::call_timeout::{Shortfall, within_budget};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::grpc_code::GrpcCode;
use crate::outcome::Outcome;
use crate::time::{Instant, div_1_000, duration_to_micros, duration_to_micros_ceil};

/// The largest statement timeout PostgreSQL accepts, in milliseconds (`INT_MAX`).
pub const MAX_STATEMENT_MILLIS: u32 = i32::MAX as u32;

/// The PostgreSQL statement that checks the transaction's deferred constraints now, rather than
/// at its `COMMIT`: `SET CONSTRAINTS ALL IMMEDIATE`. Send it after the query, with what is left
/// of the statement timeout set before it, then `COMMIT`.
///
/// PostgreSQL turns the statement timeout off before it commits, so deferred constraints (a
/// `DEFERRABLE INITIALLY DEFERRED` foreign key, a constraint trigger) checked at `COMMIT` run
/// untimed, for as long as they take, after the caller has left. Switched to immediate after
/// the query, the checks still pending run inside this command, which the statement timeout
/// covers, and the `COMMIT` after it has none left to run. The query itself ran with its
/// constraints deferred as declared: a function, a trigger or a string of several statements
/// that relies on deferral within it runs as before, and the same checks come to the same
/// outcome (the same SQLSTATE for a violation), only timed. A query that changed nothing has
/// no checks pending, and the command does no work (sent apart from the `COMMIT`, it still
/// costs a round trip). Give it what is left of the timeout, at least a millisecond
/// ([`StatementTimeout::left_at_or_shortest`]).
///
/// ```
/// use deadline_core::statement::CHECK_DEFERRED_CONSTRAINTS;
///
/// assert_eq!(CHECK_DEFERRED_CONSTRAINTS, "SET CONSTRAINTS ALL IMMEDIATE");
/// ```
pub const CHECK_DEFERRED_CONSTRAINTS: &str = "SET CONSTRAINTS ALL IMMEDIATE";

/// How the statement timeout of a database query is derived from the time left.
///
/// The timeout is set for the query's transaction alone (`SET LOCAL`), and there it replaces
/// any `statement_timeout` the role, the database or the connection has: a stricter limit
/// of theirs holds for the query only as this policy's cap.
///
/// ```
/// use deadline_core::ms;
/// use deadline_core::statement::StatementPolicy;
///
/// // At most 300 ms per query; under 40 ms left, do not start.
/// const ORDERS: StatementPolicy = StatementPolicy::capped(ms(300)).with_floor(ms(40));
/// assert_eq!(ORDERS.cap(), ms(300));
/// assert_eq!(ORDERS.margin(), StatementPolicy::DEFAULT_MARGIN);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StatementPolicy {
    pub(crate) cap: Duration,
    pub(crate) floor: Duration,
    pub(crate) reserve: Duration,
    pub(crate) margin: Duration,
}

impl StatementPolicy {
    /// The margin a policy has unless it sets one: 5 ms.
    ///
    /// A statement timeout starts on the server when the statement arrives, after the
    /// transaction's first round trips, and its error takes one more trip back: a few
    /// round trips, well under a millisecond on loopback and about one within a data
    /// centre. 5 ms covers them with room for a busy server's scheduling, and costs a query
    /// with a 100 ms budget 5% of it. Set a larger margin for a database across a slower
    /// network; `Duration::ZERO` gives the statement all of the time left.
    pub const DEFAULT_MARGIN: Duration = Duration::from_millis(5);

    /// A query run for at most `cap`, with no floor and no reserve until they are set, and
    /// the [default margin](StatementPolicy::DEFAULT_MARGIN).
    #[must_use]
    pub const fn capped(cap: Duration) -> Self {
        StatementPolicy {
            cap,
            floor: Duration::ZERO,
            reserve: Duration::ZERO,
            margin: Self::DEFAULT_MARGIN,
        }
    }

    /// The same policy, not starting a query with less than `floor` left.
    #[must_use]
    pub const fn with_floor(mut self, floor: Duration) -> Self {
        self.floor = floor;
        self
    }

    /// The same policy with `reserve` kept for after the query (reading the rows,
    /// answering): taken off the time left before the cap and the floor apply.
    #[must_use]
    pub const fn with_reserve(mut self, reserve: Duration) -> Self {
        self.reserve = reserve;
        self
    }

    /// The same policy with the statement timeout ending `margin` before the deadline (less
    /// the reserve), so that when the server stops a statement at its timeout, its error
    /// reaches the caller before the caller gives up and has to cancel.
    #[must_use]
    pub const fn with_margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// The longest one query may run, even when more time is left.
    #[must_use]
    pub const fn cap(&self) -> Duration {
        self.cap
    }

    /// The shortest time left worth starting a query with.
    #[must_use]
    pub const fn floor(&self) -> Duration {
        self.floor
    }

    /// The time kept for after the query.
    #[must_use]
    pub const fn reserve(&self) -> Duration {
        self.reserve
    }

    /// How long before the deadline (less the reserve) the statement timeout ends.
    #[must_use]
    pub const fn margin(&self) -> Duration {
        self.margin
    }

    /// The least time left before the deadline with which a query is started
    /// ([`statement_timeout`]): the reserve, the margin, and the floor or a millisecond,
    /// whichever is longer (the shortest statement timeout). [`Duration::MAX`] when the cap
    /// is under that floor, and no query is ever started.
    ///
    /// ```
    /// use deadline_core::statement::{StatementDecision, StatementPolicy, statement_timeout};
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let orders = StatementPolicy::capped(ms(300)).with_floor(ms(40));
    /// assert_eq!(orders.needs(), ms(45));
    /// let now = Instant::ZERO;
    /// let starts = |left| matches!(
    ///     statement_timeout(&orders, Deadline::after(now, left), now),
    ///     StatementDecision::Set(_)
    /// );
    /// assert!(starts(ms(45)));
    /// assert!(!starts(ms(45) - core::time::Duration::from_micros(1)));
    /// ```
    #[must_use]
    pub const fn needs(&self) -> Duration {
        const MILLI_US: u64 = 1_000;
        let floor = duration_to_micros_ceil(self.floor);
        let floor = if floor > MILLI_US { floor } else { MILLI_US };
        if duration_to_micros(self.cap) < floor {
            return Duration::MAX;
        }
        let needs = duration_to_micros_ceil(self.reserve)
            .saturating_add(duration_to_micros_ceil(self.margin))
            .saturating_add(floor);
        Duration::from_micros(needs)
    }
}

/// A statement timeout to set before the query: whole milliseconds, at least one.
///
/// Its [`Display`](fmt::Display) form is the PostgreSQL statement that sets it for the
/// current transaction only:
///
/// ```
/// use deadline_core::{Deadline, Instant, ms};
/// use deadline_core::statement::{statement_timeout, StatementDecision, StatementPolicy};
///
/// let policy = StatementPolicy::capped(ms(300)).with_floor(ms(40));
/// let deadline = Deadline::after(Instant::ZERO, ms(1000));
/// let StatementDecision::Set(t) = statement_timeout(&policy, deadline, Instant::from_millis(800))
/// else {
///     unreachable!()
/// };
/// // 200 ms left, less the default margin of 5 ms.
/// assert_eq!(t.to_string(), "SET LOCAL statement_timeout = 195");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StatementTimeout {
    millis: u32,
}

impl StatementTimeout {
    /// The timeout in milliseconds: at least 1, at most [`MAX_STATEMENT_MILLIS`].
    #[must_use]
    pub const fn millis(self) -> u32 {
        self.millis
    }

    /// The timeout as a [`Duration`].
    #[must_use]
    pub const fn as_duration(self) -> Duration {
        Duration::from_millis(self.millis as u64)
    }

    /// For a statement timeout decided at `decided` (the `now` of [`statement_timeout`]):
    /// the instant from which the statement's time is running out. The server starts the
    /// timeout when the statement reaches it, after `decided`, so its own timeout (SQLSTATE
    /// 57014) comes at this instant or later. Inside an attempt of a driven call, hand it
    /// to the runtime ([`KeepsSent::note_sent`](crate::runtime::KeepsSent::note_sent)), as
    /// for a deadline sent in a header: a failure from then on is the attempt running out
    /// of time, counted and answered as a timeout.
    ///
    /// ```
    /// use deadline_core::{Deadline, Instant, ms};
    /// use deadline_core::statement::{statement_timeout, StatementPolicy};
    ///
    /// let policy = StatementPolicy::capped(ms(300));
    /// let now = Instant::from_millis(900);
    /// let decided = statement_timeout(&policy, Deadline::after(Instant::ZERO, ms(1_000)), now);
    /// // 100 ms left, less the 5 ms margin: the statement runs out from 995 ms on.
    /// let timeout = decided.timeout().unwrap();
    /// assert_eq!(timeout.running_out_from(now), Instant::from_millis(995));
    /// ```
    #[must_use]
    pub const fn running_out_from(self, decided: Instant) -> Instant {
        decided.saturating_add(self.as_duration())
    }

    /// What is left at `now` of this timeout, decided at `decided`: the statement timeout to
    /// set for the rest of a statement that the server times in two parts. PostgreSQL times
    /// a prepared statement's parse and its run apart, each from its first message to its
    /// `Sync` (the extended query protocol), so a parse that waited (behind a lock on a table
    /// it reads) would give the run a whole timeout again, past the deadline: set what is
    /// left before the run, and the statement ends when its timeout would have, or less than
    /// a millisecond after.
    ///
    /// In whole milliseconds, rounded up, so that the rest never runs out before this whole
    /// timeout would have ([`running_out_from`](Self::running_out_from)): that is the instant
    /// a runtime was told the statement runs out from, and an error before it is not read as
    /// the statement's time running out. (Rounded down, a run set 0.3 ms after the decision
    /// would end up to 0.7 ms early, and its 57014 come back as a failure of the database.)
    /// It ends less than a millisecond after the whole timeout: still before the deadline
    /// when the policy's margin and reserve add up to a millisecond or more (the default
    /// margin is 5 ms; with none, the run may end within a millisecond after the deadline).
    /// An instant `now` before `decided` is taken as `decided`. `None` when nothing is left: the statement's time is spent, and it is this timeout's
    /// error ([`error_of`](Self::error_of)) without running it. Judge the run's errors by
    /// what is left and the instant it was set (`rest.error_of(sqlstate, now, failed_at)`).
    ///
    /// ```
    /// use deadline_core::{Deadline, Instant, ms};
    /// use deadline_core::statement::{statement_timeout, StatementPolicy};
    ///
    /// let decided = Instant::from_millis(900);
    /// let deadline = Deadline::after(Instant::ZERO, ms(1_000));
    /// let timeout = statement_timeout(&StatementPolicy::capped(ms(300)), deadline, decided)
    ///     .timeout()
    ///     .unwrap();
    /// assert_eq!(timeout.millis(), 95);
    /// // The parse took 40.5 ms: 54.5 ms are left for the run, set as 55.
    /// let rest = timeout.left_at(decided, Instant::from_micros(940_500)).unwrap();
    /// assert_eq!(rest.to_string(), "SET LOCAL statement_timeout = 55");
    /// assert_eq!(timeout.left_at(decided, Instant::from_micros(994_999)).unwrap().millis(), 1);
    /// assert_eq!(timeout.left_at(decided, Instant::from_micros(995_000)), None);
    /// ```
    #[must_use]
    pub const fn left_at(self, decided: Instant, now: Instant) -> Option<StatementTimeout> {
        let end = self.running_out_from(decided).as_micros();
        // From `decided` at the earliest: what is left is at most this timeout.
        let now = if now.as_micros() < decided.as_micros() {
            decided
        } else {
            now
        };
        let left = end.saturating_sub(now.as_micros());
        // Rounded up; at most this timeout's milliseconds (the time left is at most its
        // microseconds, which are whole milliseconds): it fits.
        // `whole × 1 000 <= left`, and `whole` is far below `u64::MAX`: neither wraps.
        let whole = div_1_000(left);
        let millis = if whole.wrapping_mul(1_000) < left {
            whole.wrapping_add(1)
        } else {
            whole
        };
        if millis == 0 {
            None
        } else {
            Some(StatementTimeout {
                millis: millis as u32,
            })
        }
    }

    /// What is left at `now` of this timeout, decided at `decided`, as
    /// [`left_at`](Self::left_at) says, but never less than a millisecond, the shortest
    /// timeout PostgreSQL takes: for a statement that must run timed whatever is left, as the
    /// check of deferred constraints before a `COMMIT` ([`CHECK_DEFERRED_CONSTRAINTS`]), which
    /// would otherwise be left to the `COMMIT`, untimed. With nothing left, it is a
    /// millisecond from when it is set, after this timeout has ended.
    ///
    /// ```
    /// use deadline_core::Instant;
    /// use deadline_core::statement::{statement_timeout, StatementPolicy};
    /// use deadline_core::{Deadline, ms};
    ///
    /// let decided = Instant::ZERO;
    /// let deadline = Deadline::after(decided, ms(100));
    /// let timeout = statement_timeout(&StatementPolicy::capped(ms(300)), deadline, decided)
    ///     .timeout()
    ///     .unwrap();
    /// assert_eq!(timeout.millis(), 95);
    /// let left = |at| timeout.left_at_or_shortest(decided, Instant::from_micros(at)).millis();
    /// assert_eq!(left(40_500), 55);
    /// assert_eq!(left(94_001), 1);
    /// assert_eq!(left(95_000), 1);
    /// assert_eq!(left(200_000), 1);
    /// ```
    #[must_use]
    pub const fn left_at_or_shortest(self, decided: Instant, now: Instant) -> StatementTimeout {
        match self.left_at(decided, now) {
            Some(left) => left,
            None => StatementTimeout { millis: 1 },
        }
    }

    /// What a database error with this SQLSTATE is, for a query run with this statement
    /// timeout, decided at `decided` (or a reading of the same clock before it), and failed at
    /// `now`:
    /// [`Error::Timeout`] after the timeout when it is the timeout firing, `None` for any other
    /// error, the database's own. `sqlstate` is the error's five-character code, as the client
    /// library gives it.
    ///
    /// The timeout firing is PostgreSQL's `query_canceled` (57014) at or after the statement's
    /// time ran out ([`running_out_from`](Self::running_out_from)): the statement ran out of
    /// the time it was given, which is the caller's deadline less the margin. The server
    /// starts the timeout when the statement reaches it, after `decided`, so its own 57014
    /// never comes before then; one that does is a cancel of someone else's (an
    /// administrator's `pg_cancel_backend`, a pooler's), the database's own error.
    ///
    /// ```
    /// use deadline_core::{Deadline, Error, Instant, ms};
    /// use deadline_core::statement::{statement_timeout, StatementPolicy};
    ///
    /// let decided = statement_timeout(
    ///     &StatementPolicy::capped(ms(300)),
    ///     Deadline::after(Instant::ZERO, ms(1_000)),
    ///     Instant::ZERO,
    /// );
    /// let timeout = decided.timeout().unwrap();
    /// let at = Instant::from_millis;
    /// assert_eq!(
    ///     timeout.error_of(b"57014", Instant::ZERO, at(301)),
    ///     Some(Error::Timeout { after: ms(300) })
    /// );
    /// // Cancelled 10 ms in: not the timeout, which could not have fired yet.
    /// assert_eq!(timeout.error_of(b"57014", Instant::ZERO, at(10)), None);
    /// // A unique violation is the database's own error.
    /// assert_eq!(timeout.error_of(b"23505", Instant::ZERO, at(301)), None);
    /// ```
    #[must_use]
    pub fn error_of(self, sqlstate: &[u8], decided: Instant, now: Instant) -> Option<Error> {
        (sqlstate == QUERY_CANCELED && now >= self.running_out_from(decided)).then(|| {
            Error::Timeout {
                after: self.as_duration(),
            }
        })
    }
}

/// PostgreSQL's SQLSTATE for a statement cancelled, by its statement timeout among others.
const QUERY_CANCELED: &[u8] = b"57014";

/// The gRPC code that answers a caller whose request failed on a PostgreSQL statement with
/// `sqlstate` (its five characters; `None` for an error the database did not name), as
/// `deadline-tokio`'s `PgError` and `SqlxError` answer for `?` in a handler (and, for HTTP,
/// the Connect table's status: [`GrpcCode::connect_http_status`]). What the caller's own
/// client makes of it follows ([`ResponseHead::classify`](crate::wire::ResponseHead::classify)):
/// the request at fault is the service's answer, not its failure, and a clash with another
/// transaction is the caller's to run again.
///
/// | SQLSTATE | code | HTTP |
/// |---|---|---|
/// | `23505` unique violation, `23P01` exclusion violation | `ALREADY_EXISTS` | 409 |
/// | any other of class `23` (a foreign key, a `NOT NULL`, a `CHECK`) | `FAILED_PRECONDITION` | 400 |
/// | class `22`: data the statement cannot take (a value out of range, text that is not a number), but for the three below | `INVALID_ARGUMENT` | 400 |
/// | `40001` serialization failure, `40P01` deadlock | `ABORTED` | 409 |
/// | class `08` (the connection), class `53` (the server's resources: too many connections, out of memory), `57P01` to `57P03` (the server shutting down or starting) | `UNAVAILABLE` | 503 |
/// | `08P01` (a protocol violation: a statement sent with the wrong number of parameters), `2200H` (a sequence used up), `22P03` and `22P04` (binary parameters or `COPY` data the service encoded wrongly), any other, or none | `INTERNAL` | 500 |
///
/// A statement timeout is the deadline's, not this ([`StatementTimeout::error_of`]).
///
/// ```
/// use deadline_core::statement::grpc_code_of_sqlstate;
/// use deadline_core::wire::GrpcCode;
///
/// assert_eq!(grpc_code_of_sqlstate(Some(b"23505")), GrpcCode::AlreadyExists);
/// assert_eq!(grpc_code_of_sqlstate(Some(b"23505")).connect_http_status(), 409);
/// assert_eq!(grpc_code_of_sqlstate(Some(b"40001")), GrpcCode::Aborted);
/// assert_eq!(grpc_code_of_sqlstate(Some(b"42P01")), GrpcCode::Internal); // no such table: the service's fault
/// assert_eq!(grpc_code_of_sqlstate(None), GrpcCode::Internal);
/// ```
#[must_use]
pub fn grpc_code_of_sqlstate(sqlstate: Option<&[u8]>) -> GrpcCode {
    let Some(sqlstate) = sqlstate else {
        return GrpcCode::Internal;
    };
    match sqlstate {
        // The service's own fault, or the database's, within classes read otherwise below.
        b"08P01" | b"2200H" | b"22P03" | b"22P04" => GrpcCode::Internal,
        b"23505" | b"23P01" => GrpcCode::AlreadyExists,
        b"40001" | b"40P01" => GrpcCode::Aborted,
        b"57P01" | b"57P02" | b"57P03" => GrpcCode::Unavailable,
        [b'2', b'3', ..] => GrpcCode::FailedPrecondition,
        [b'2', b'2', ..] => GrpcCode::InvalidArgument,
        [b'0', b'8', ..] | [b'5', b'3', ..] => GrpcCode::Unavailable,
        _ => GrpcCode::Internal,
    }
}

/// How a PostgreSQL statement that failed with `sqlstate` (its five characters; `None` for an
/// error the database did not name: the connection's) ended, as far as retrying it is
/// concerned: what `deadline-tokio`'s `postgres::classify` and `sqlx::classify` read a
/// database's error as, in a [`Dependency`](crate::Dependency)'s call.
///
/// | SQLSTATE | outcome |
/// |---|---|
/// | `40001` serialization failure, `40P01` deadlock: the transaction was rolled back, nothing it did stands | [`Outcome::Refused`]: run again, idempotent or not |
/// | `08001`, `08004` (no connection made, or refused), `53300` (too many connections), `57P03` (the server starting): the statement never ran | [`Outcome::Refused`] |
/// | any other of class `08` (the connection lost; but `08P01`, a protocol violation, the service's fault: below), class `53` (out of memory, disk full), `57P01` and `57P02` (the server shutting down), `57014` (a cancel that is not the deadline's), or none | [`Outcome::Failed`]: it may have run, so a call that is not idempotent is not repeated |
/// | otherwise as its gRPC code ([`grpc_code_of_sqlstate`]) reads ([`classify_grpc`](crate::wire::classify_grpc)): class `22` (bad data) and `23` (a constraint) the request's fault | [`Outcome::Fatal`]: never retried, not held against the dependency |
/// | the rest (`INTERNAL`: no such table, a syntax error, `08P01`, the database's internal error) | [`Outcome::Broken`]: never retried, held against the dependency's circuit breaker |
///
/// A statement timeout is the deadline's, not this: a timeout ([`StatementTimeout::error_of`]).
///
/// The outcome is the failed transaction's. It is the attempt's when the attempt is that one
/// transaction (one query of `deadline-tokio`'s, each in a transaction of its own): an attempt
/// that ran a transaction before it, which committed, is not safe to repeat because the last
/// one was rolled back; classify its errors yourself.
///
/// ```
/// use deadline_core::Outcome;
/// use deadline_core::statement::outcome_of_sqlstate;
///
/// assert_eq!(outcome_of_sqlstate(Some(b"40001")), Outcome::Refused);
/// assert_eq!(outcome_of_sqlstate(Some(b"23505")), Outcome::Fatal); // a duplicate key: final
/// assert_eq!(outcome_of_sqlstate(Some(b"57P01")), Outcome::Failed);
/// assert_eq!(outcome_of_sqlstate(Some(b"42P01")), Outcome::Broken); // no such table
/// assert_eq!(outcome_of_sqlstate(None), Outcome::Failed);
/// ```
#[must_use]
pub fn outcome_of_sqlstate(sqlstate: Option<&[u8]>) -> Outcome {
    let Some(state) = sqlstate else {
        return Outcome::Failed;
    };
    match state {
        b"40001" | b"40P01" | b"08001" | b"08004" | b"53300" | b"57P03" => Outcome::Refused,
        // A protocol violation (a statement sent with the wrong number of parameters): the
        // service's fault, as its gRPC code says below.
        b"08P01" => Outcome::Broken,
        b"57P01" | b"57P02" | b"57014" | [b'0', b'8', ..] | [b'5', b'3', ..] => Outcome::Failed,
        _ => crate::wire::classify_grpc(grpc_code_of_sqlstate(sqlstate), None)
            .unwrap_or(Outcome::Broken),
    }
}

/// `SET LOCAL statement_timeout = N`, with `N` in milliseconds.
impl fmt::Display for StatementTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SET LOCAL statement_timeout = {}", self.millis)
    }
}

/// Whether to run a query, and with which statement timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum StatementDecision {
    /// Set this statement timeout, then run the query.
    Set(StatementTimeout),
    /// Do not start the query: the time left is under the floor (or under one millisecond).
    /// [`Shortfall::error`] is the error to report.
    DontStart(Shortfall),
}

impl StatementDecision {
    /// The timeout to set, if the query is to run.
    #[must_use]
    pub const fn timeout(&self) -> Option<StatementTimeout> {
        match self {
            StatementDecision::Set(t) => Some(*t),
            StatementDecision::DontStart(_) => None,
        }
    }
}

/// Decides a query's statement timeout at `now`: `min(cap, deadline - now - reserve -
/// margin)` in whole milliseconds (rounded down), or [`StatementDecision::DontStart`] when
/// that is under `policy.floor` or under one millisecond (the same rule as
/// [`crate::call::call_timeout`], with the margin taken off like the reserve). All arithmetic
/// saturates.
///
/// Guarantees, for a [`StatementDecision::Set`]: `1 ms <= timeout <= cap`, `timeout >= floor`
/// rounded down to whole milliseconds, and `now + timeout <= deadline - reserve - margin`.
///
/// ```
/// use core::time::Duration;
/// use deadline_core::{Deadline, Instant, ms};
/// use deadline_core::statement::{statement_timeout, StatementDecision, StatementPolicy};
///
/// // The propagation model's database: `ms = int(min(0.3, left) * 1000)`, and "don't start"
/// // under 40 ms left. The model's database answers in no time: no margin.
/// let policy = StatementPolicy::capped(ms(300)).with_floor(ms(40)).with_margin(Duration::ZERO);
/// let deadline = Deadline::after(Instant::ZERO, ms(1000));
/// let at = |t| statement_timeout(&policy, deadline, Instant::from_millis(t));
/// assert_eq!(at(0).timeout().map(|t| t.millis()), Some(300));
/// assert_eq!(at(900).timeout().map(|t| t.millis()), Some(100));
/// assert!(matches!(at(965), StatementDecision::DontStart(s) if s.available() == ms(35)));
///
/// // A real database, with the default margin of 5 ms: the server ends the statement 5 ms
/// // before the caller's deadline, and its error has that long to come back.
/// let real = StatementPolicy::capped(ms(300)).with_floor(ms(40));
/// let t = statement_timeout(&real, deadline, Instant::from_millis(900));
/// assert_eq!(t.timeout().map(|t| t.millis()), Some(95));
/// ```
///
/// The database is the last hop of a request: when the caller gives up, the query should stop
/// too. Before each query, set the statement timeout to what is left of the deadline, capped,
/// and do not start the query at all when too little is left:
///
/// ```text
/// available = min(cap, deadline - now - reserve - margin)
/// available < floor  -> do not start
/// otherwise          -> SET LOCAL statement_timeout = available, in whole ms, rounded down
/// ```
///
/// The timeout is rounded down to whole milliseconds, so it never exceeds the time left, and it
/// is never zero: PostgreSQL reads `statement_timeout = 0` as "no timeout at all", so a time
/// left under one millisecond is a "do not start", whatever the floor.
///
/// Without the margin, a statement that runs to its timeout ends on the server within a
/// millisecond of the caller's deadline, and the caller, whose timer fires first, cancels a
/// statement that was about to end by itself. The margin lets the server's own timeout win:
/// the caller gets the statement's error ([`Error::Timeout`] in the
/// adapters) before its deadline, and no cancel is sent.
pub fn statement_timeout(
    policy: &StatementPolicy,
    deadline: Deadline,
    now: Instant,
) -> StatementDecision {
    let left = deadline.left_micros(now);
    // Whole microseconds: the cap rounded down, the reserve and the floor up.
    let floor = duration_to_micros_ceil(policy.floor);
    // The reserve and the margin, both off the time left (each rounded up to whole micros).
    let reserve = duration_to_micros_ceil(policy.reserve)
        .saturating_add(duration_to_micros_ceil(policy.margin));
    let available = match within_budget(left, reserve, duration_to_micros(policy.cap), floor) {
        Ok(available) => available,
        Err(shortfall) => return StatementDecision::DontStart(shortfall),
    };
    // Whole milliseconds, rounded down (a multiply: no division); clamped to the largest.
    let millis = min_u32(div_1_000(available), MAX_STATEMENT_MILLIS);
    if millis == 0 {
        // Under a millisecond: a statement timeout of zero would mean none at all.
        return StatementDecision::DontStart(Shortfall::from_micros(left, available, floor));
    }
    StatementDecision::Set(StatementTimeout { millis })
}

/// `x` as a `u32`, at most `max`.
const fn min_u32(x: u64, max: u32) -> u32 {
    if x < max as u64 { x as u32 } else { max }
}
