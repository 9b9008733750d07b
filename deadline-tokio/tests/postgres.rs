//! A real PostgreSQL: queries stop in the server the moment nobody waits for them, measured
//! from `pg_stat_activity`.
//!
//! The database comes from `DEADLINE_TEST_DATABASE_URL` (a `postgres://` URL); without it
//! every test here fails, naming the variable. `eval "$(bash scripts/postgres.sh start)"`
//! starts a throwaway server and sets it; `scripts/test.sh` does so itself.
//!
//! Real sockets and a real server run on real time, so these tests assert what happened, not
//! how fast: a stalled query sleeps [`STALL_SECS`] (60 s), and where a test asks whether
//! the library ended it, nothing else could end it within the 10 s a test waits for it to go
//! (the statement timeout's cap is 60 s there); a query gone within that wait was ended by
//! the library (its statement timeout from a shorter time left, or its cancel). How soon it went is
//! printed (`--nocapture`); `scripts/chain.sh` measures it over the real chain of services.
//! Every loop is bounded in count and time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use deadline_core::statement::StatementPolicy;
use deadline_core::{Error, ms};
use deadline_tokio::postgres::{self, Database, PgError, Session};
use deadline_tokio::scope_timeout;
use tokio_postgres::{Client, NoTls, Row, Transaction};

/// Queries that are not cut off run this long (`pg_sleep`), far beyond any deadline here and
/// any wait for a query to go.
const STALL_SECS: f64 = 60.0;
/// A statement timeout far beyond a test's wait for a query to go: with it, only the library
/// (a statement timeout from a shorter time left, or a cancel) ends a stalled query in time.
const FAR: StatementPolicy = StatementPolicy::capped(ms(60_000)).with_floor(ms(1));
/// At most 10 s per query, under 1 ms do not start.
const POLICY: StatementPolicy = StatementPolicy::capped(ms(10_000)).with_floor(ms(1));

fn database_url() -> String {
    std::env::var("DEADLINE_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "DEADLINE_TEST_DATABASE_URL is not set: these tests need a PostgreSQL server. \
             Start a throwaway one with `eval \"$(bash scripts/postgres.sh start)\"`, \
             or run `bash scripts/test.sh`, which does."
        )
    })
}

async fn connect() -> Client {
    let (client, connection) = tokio_postgres::connect(&database_url(), NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to DEADLINE_TEST_DATABASE_URL: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A tag unique to one query of this run, to find it in `pg_stat_activity`.
fn tag(name: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "deadline_test_{name}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

fn stalled(tag: &str) -> String {
    format!("SELECT pg_sleep({STALL_SECS}) /* {tag} */")
}

/// Whether the `pg_sleep` query with `tag` is running, seen from `observer`: in its sleep
/// (`wait_event = 'PgSleep'`). A query is `active` with its text already while it is parsed,
/// before it runs: a caller that left then would have dropped a query that never ran.
async fn running(observer: &Client, tag: &str) -> bool {
    let row = observer
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE state = 'active' AND wait_event = 'PgSleep' \
             AND pid <> pg_backend_pid() AND position($1 in query) > 0",
            &[&tag],
        )
        .await
        .unwrap();
    row.get::<_, i64>(0) > 0
}

/// Waits (bounded: 10 s, in 1 ms steps) until the query with `tag` is running or not.
async fn until(observer: &Client, tag: &str, want_running: bool) -> Instant {
    let start = Instant::now();
    for _ in 0..10_000 {
        if running(observer, tag).await == want_running {
            return Instant::now();
        }
        if start.elapsed() > Duration::from_secs(10) {
            break;
        }
        tokio::time::sleep(ms(1)).await;
    }
    panic!("query {tag} never became running = {want_running}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_runs_and_the_connection_stays_usable() {
    let mut client = connect().await;
    let rows = scope_timeout(
        ms(5_000),
        postgres::query(&mut client, &POLICY, "SELECT $1::int + 1", &[&41_i32]),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    assert_eq!(rows[0].get::<_, i32>(0), 42);
    // SET LOCAL applied inside the transaction: the timeout is the time left, capped.
    let rows = scope_timeout(
        ms(5_000),
        postgres::query(&mut client, &POLICY, "SHOW statement_timeout", &[]),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    let shown: String = rows[0].get(0);
    assert!(shown.ends_with("ms") || shown.ends_with('s'), "{shown}");
    // And only there: outside, the session's own setting is untouched.
    let row = client
        .query_one("SHOW statement_timeout", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "0");
}

/// A database's error answers the caller by its SQLSTATE: a unique violation is the
/// request at fault (409, `ALREADY_EXISTS`), bad input too (400, `INVALID_ARGUMENT`), and
/// only what the database does not name as the caller's is the service failing (500,
/// `INTERNAL`). All were 500 and `INTERNAL`, which a caller's client holds against the
/// service's breaker: a service whose callers often insert a duplicate was cut off.
#[cfg(all(feature = "tonic", feature = "tower"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_error_answers_by_its_sqlstate() {
    async fn failure(client: &mut Client, sql: &str) -> PgError {
        scope_timeout(ms(5_000), postgres::execute(client, &POLICY, sql, &[]))
            .await
            .expect("inside its scope")
            .unwrap_err()
    }
    let mut client = connect().await;
    let table = tag("unique");
    client
        .batch_execute(&format!("CREATE TEMP TABLE {table} (id int PRIMARY KEY)"))
        .await
        .unwrap();
    for (sql, code, status) in [
        (
            format!("INSERT INTO {table} VALUES (1), (1)"),
            tonic::Code::AlreadyExists,
            http::StatusCode::CONFLICT,
        ),
        (
            "SELECT 1 / 0".to_owned(),
            tonic::Code::InvalidArgument,
            http::StatusCode::BAD_REQUEST,
        ),
        (
            "SELECT * FROM no_such_table_here".to_owned(),
            tonic::Code::Internal,
            http::StatusCode::INTERNAL_SERVER_ERROR,
        ),
    ] {
        let error = failure(&mut client, &sql).await;
        assert!(matches!(error, PgError::Db(_)), "{sql}: {error:?}");
        assert_eq!(tonic::Status::from(error).code(), code, "{sql}");
        let error = failure(&mut client, &sql).await;
        assert_eq!(http::StatusCode::from(error), status, "{sql}");
    }
    // A connection closed under its client: the database out of reach, 503.
    let (mut closed, connection) = tokio_postgres::connect(&database_url(), NoTls)
        .await
        .unwrap();
    drop(connection);
    let error = failure(&mut closed, "SELECT 1").await;
    assert_eq!(tonic::Status::from(error).code(), tonic::Code::Unavailable);
    let error = failure(&mut closed, "SELECT 1").await;
    assert_eq!(
        http::StatusCode::from(error),
        http::StatusCode::SERVICE_UNAVAILABLE
    );
}

/// Inside a dependency's call, a database's error is read by its SQLSTATE
/// (`postgres::classify`): a duplicate key is final, one attempt and the database's error,
/// however many retries the policy allows; a serialization failure (its transaction rolled
/// back, nothing done) runs again, even for a call that is not idempotent. (The default
/// classifier reads every error as a failure a retry may fix: the duplicate was tried three
/// times, and the serialization failure of a call that is not idempotent never again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_error_in_a_dependency_call_is_read_by_its_sqlstate() {
    use deadline_core::policy::Backoff;
    use deadline_core::{CallError, Policy};
    use deadline_tokio::Dependency;
    use tokio_postgres::error::SqlState;

    static INSERTS: Dependency = Dependency::new(
        Policy::required("inserts")
            .idempotent()
            .with_cap(ms(2_000))
            .with_retries(2)
            .with_backoff(Backoff::constant(ms(1))),
    );
    static PAYMENTS: Dependency = Dependency::new(
        Policy::required("payments")
            .not_idempotent()
            .with_cap(ms(2_000))
            .with_retries(1)
            .with_backoff(Backoff::constant(ms(1))),
    );
    let client = &tokio::sync::Mutex::new(connect().await);
    let table = tag("dependency_unique");
    client
        .lock()
        .await
        .batch_execute(&format!(
            "CREATE TEMP TABLE {table} (id int PRIMARY KEY); INSERT INTO {table} VALUES (1)"
        ))
        .await
        .unwrap();

    let insert = &format!("INSERT INTO {table} VALUES (1)");
    let tries = &AtomicUsize::new(0);
    let called = scope_timeout(
        ms(5_000),
        INSERTS
            .run(move |_| async move {
                tries.fetch_add(1, Ordering::SeqCst);
                postgres::execute(&mut *client.lock().await, &POLICY, insert, &[]).await
            })
            .classify(postgres::classify),
    )
    .await
    .expect("inside its scope");
    match called {
        Err(CallError::Attempt(PgError::Db(error))) => {
            assert_eq!(error.code(), Some(&SqlState::UNIQUE_VIOLATION));
        }
        other => panic!("the database's error, not {other:?}"),
    }
    assert_eq!(tries.load(Ordering::SeqCst), 1);
    assert_eq!(INSERTS.counters().snapshot().retries, 0);

    let clash =
        "DO $$ BEGIN RAISE EXCEPTION 'clash' USING ERRCODE = 'serialization_failure'; END $$";
    let tries = &AtomicUsize::new(0);
    let called = scope_timeout(
        ms(5_000),
        PAYMENTS
            .run(move |_| async move {
                let first = tries.fetch_add(1, Ordering::SeqCst) == 0;
                let sql = if first { clash } else { "SELECT 1" };
                postgres::execute(&mut *client.lock().await, &POLICY, sql, &[]).await
            })
            .classify(postgres::classify),
    )
    .await
    .expect("inside its scope");
    assert!(called.is_ok(), "{called:?}");
    assert_eq!(tries.load(Ordering::SeqCst), 2);
    assert_eq!(PAYMENTS.counters().snapshot().retries, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlstate_57014_is_the_librarys_timeout() {
    let mut client = connect().await;
    // A cap of 50 ms: the statement timeout fires in the server, long before the deadline.
    let short = StatementPolicy::capped(ms(50)).with_floor(ms(1));
    let tag = tag("timeout");
    let result = scope_timeout(
        ms(5_000),
        postgres::query(&mut client, &short, &stalled(&tag), &[]),
    )
    .await
    .expect("inside its scope");
    match result {
        Err(PgError::Deadline(Error::Timeout { after })) => assert_eq!(after, ms(50)),
        other => panic!("expected the timeout, got {other:?}"),
    }
    // The transaction was rolled back: the connection answers.
    let row = client.query_one("SELECT 1", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 1);
}

/// A query as a dependency's attempt (`Dependency::run`): the statement timeout, decided from
/// the attempt's 200 ms less a 60 ms margin, fires in the server about 60 ms before the
/// attempt's own end. The attempt ran out of its time: the call's error is the library's
/// timeout (504), counted as one, not the dependency failing (502).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_timeout_in_a_dependency_call_is_the_calls_timeout() {
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::{CallError, Policy};
    use deadline_tokio::Dependency;

    static ORDERS: Dependency<DeadlineOnly> =
        Dependency::deadline_only(Policy::required("orders").with_cap(ms(200)));
    const MARGIN: StatementPolicy = StatementPolicy::capped(ms(10_000))
        .with_floor(ms(1))
        .with_margin(ms(60));
    let statement = stalled(&tag("dependency"));
    // Connected before the call: the attempt's 200 ms are the query's alone.
    let mut client = Some(connect().await);
    let statement = &statement;
    let called = scope_timeout(
        ms(5_000),
        ORDERS.run(|_| {
            let mut client = client
                .take()
                .expect("a deadline-only call makes one attempt");
            async move { postgres::query(&mut client, &MARGIN, statement, &[]).await }
        }),
    )
    .await
    .expect("inside its scope");
    match called {
        Err(CallError::Library(Error::Timeout { after })) => assert!(after <= ms(200)),
        other => panic!("the call's timeout, not {other:?}"),
    }
    assert_eq!(ORDERS.counters().snapshot().timeouts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_is_not_started_with_too_little_time_left() {
    let mut client = connect().await;
    // A second is under the 10 s floor, however slow the machine.
    let policy = StatementPolicy::capped(ms(10_000)).with_floor(ms(10_000));
    let result = scope_timeout(
        ms(1_000),
        postgres::query(&mut client, &policy, "SELECT 1", &[]),
    )
    .await
    .expect("inside its scope");
    assert!(
        matches!(
            result,
            Err(PgError::Deadline(Error::InsufficientTime { .. }))
        ),
        "{result:?}"
    );
}

/// A query whose `BEGIN` waited until too little of its attempt's time was left is refused,
/// and was never sent: the attempt ran out of its own time (its 1 s cap, with 4 s of the
/// call's left) and the call ends with its timeout, not as a failed dependency (which the
/// breaker would count). The check before `BEGIN` notes nothing as sent: it used to note the
/// statement timeout as sent already, which made the refusal a failure.
///
/// A query dropped just before runs on in the server for 600 ms from when it was seen
/// running, and the attempt's `BEGIN` waits behind it. The attempt (1 s) is then left at most
/// 400 ms and the time from that sight to its start: under the 750 ms floor unless that took
/// over 350 ms. The attempt's own timeout comes first only if the machine stood still for some
/// 400 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_that_waited_for_begin_until_too_late_was_never_sent() {
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::{CallError, Policy};
    use deadline_tokio::Dependency;

    static LATE: Dependency<DeadlineOnly> =
        Dependency::deadline_only(Policy::required("late_begin").with_cap(ms(1_000)));
    const FLOORED: StatementPolicy = StatementPolicy::capped(ms(10_000)).with_floor(ms(750));
    let observer = connect().await;
    let mut client = connect().await;
    let tag = tag("begin_too_late");
    let sql = format!("SELECT pg_sleep(0.6) /* {tag} */");
    // The caller leaves once the query runs; it runs on in the server for its 600 ms.
    tokio::select! {
        done = scope_timeout(ms(10_000), postgres::query(&mut client, &POLICY, &sql, &[])) => {
            panic!("the query ended: {done:?}")
        }
        _ = until(&observer, &tag, true) => {}
    }
    let mut client = Some(client);
    let called = scope_timeout(
        ms(5_000),
        LATE.run(|_| {
            let mut client = client
                .take()
                .expect("a deadline-only call makes one attempt");
            async move { postgres::query(&mut client, &FLOORED, "SELECT 1", &[]).await }
        }),
    )
    .await
    .expect("inside its scope");
    assert!(
        matches!(called, Err(CallError::Library(Error::Timeout { after })) if after < ms(1_000)),
        "{called:?}"
    );
    let counts = LATE.counters().snapshot();
    assert_eq!(
        (counts.timeouts, counts.deadline_exceeded),
        (1, 0),
        "{counts:?}"
    );
}

/// The deadline passes while the query runs: its statement timeout, from the 300 ms left, ends
/// it in the server (or the scope drops it, if its timer fires first); the query, capped at
/// 60 s, is gone within the test's wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_library_a_query_is_gone_when_the_deadline_passes() {
    let observer = connect().await;
    let mut client = connect().await;
    let tag = tag("deadline");
    let sql = stalled(&tag);
    let budget = ms(300);
    let start = Instant::now();
    // The statement timeout ends the query a margin before the deadline; on a busy machine
    // the scope's own timer may still fire first and drop the query. Either is the deadline.
    let result = scope_timeout(budget, postgres::query(&mut client, &FAR, &sql, &[])).await;
    let ended = Instant::now();
    assert!(
        matches!(
            result,
            Ok(Err(PgError::Deadline(_))) | Err(Error::DeadlineExceeded)
        ),
        "the deadline's error: {result:?}"
    );
    let gone = until(&observer, &tag, false).await;
    let deadline = start + budget;
    let after = gone.saturating_duration_since(deadline.max(ended));
    eprintln!(
        "deadline passing: the query ended {:?} after the deadline, gone from pg_stat_activity {:?} after that",
        ended.saturating_duration_since(deadline),
        after
    );
    // The connection goes on serving.
    let row = client.query_one("SELECT 1", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 1);
}

/// The caller leaves at 100 ms (its future is dropped), long before the deadline and the
/// statement timeout (60 s): a session cancels the query in the server, which is gone within
/// the test's wait, and its connection serves the next query once the cancel has settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_session_a_query_is_gone_when_the_caller_leaves() {
    let observer = connect().await;
    let db = Database::new(&database_url().parse().unwrap(), NoTls).unwrap();
    let mut session = db.connect().await.unwrap();
    let tag = tag("left");
    let sql = stalled(&tag);
    let waited = tokio::time::timeout(
        ms(100),
        scope_timeout(ms(60_000), session.query(&FAR, &sql, &[])),
    )
    .await;
    let left = Instant::now();
    assert!(waited.is_err(), "the caller left before the query ended");
    let gone = until(&observer, &tag, false).await;
    let after = gone.saturating_duration_since(left);
    eprintln!("caller left, with a session: the query ran on {after:?} in the database");
    let rows = scope_timeout(ms(5_000), session.query(&POLICY, "SELECT 1", &[]))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(rows[0].get::<_, i32>(0), 1);
    let cancels = db.cancels();
    assert_eq!(
        (cancels.sent(), cancels.failed(), cancels.closed()),
        (1, 0, 0)
    );
}

/// `postgres::query` over a `&mut Client` cannot keep the client after its future is dropped,
/// so it sends no cancel (one sent then could reach the client's next query): a query dropped
/// early runs on after the caller left, and its statement timeout (1 s) ends it: it is gone
/// within the test's wait, which its 60 s sleep would outlast.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_session_a_dropped_query_ends_at_its_statement_timeout() {
    let observer = connect().await;
    let mut client = connect().await;
    let tag = tag("free");
    let sql = stalled(&tag);
    let policy = StatementPolicy::capped(ms(1_000));
    let waited = tokio::time::timeout(
        ms(100),
        scope_timeout(ms(10_000), postgres::query(&mut client, &policy, &sql, &[])),
    )
    .await;
    assert!(waited.is_err(), "the caller left before the query ended");
    tokio::time::sleep(ms(300)).await;
    assert!(running(&observer, &tag).await, "no cancel was sent");
    until(&observer, &tag, false).await;
    // The client serves its next query, which is not cancelled.
    let row = client.query_one("SELECT 1", &[]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 1);
}

/// The statement timeout is decided once the transaction has begun. A query dropped early
/// runs on in the server (here 2 s), the client's next query waits behind it for its
/// `BEGIN`, and that wait is not the next query's to spend: its statement timeout is at most
/// what is left of its deadline once the dropped query has ended (which is no earlier than
/// 2 s after it was sent: a bound from the order of events, not from a speed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_session_the_wait_for_begin_comes_out_of_the_next_querys_timeout() {
    let observer = connect().await;
    let mut client = connect().await;
    let tag = tag("begin_waits");
    let sql = format!("SELECT pg_sleep(2) /* {tag} */");
    let sent = Instant::now();
    // The caller leaves once the query runs, long before its statement timeout (10 s).
    tokio::select! {
        done = scope_timeout(ms(10_000), postgres::query(&mut client, &POLICY, &sql, &[])) => {
            panic!("the query ended: {done:?}")
        }
        _ = until(&observer, &tag, true) => {}
    }
    let asked = Instant::now();
    let rows = scope_timeout(
        ms(3_000),
        postgres::query(
            &mut client,
            &POLICY,
            "SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout'",
            &[],
        ),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    let timeout_ms: i64 = rows[0].get(0);
    let left_after_the_wait = (asked + ms(3_000)).saturating_duration_since(sent + ms(2_000));
    println!(
        "statement timeout {timeout_ms} ms; at most {} ms were left once the dropped query ended",
        left_after_the_wait.as_millis()
    );
    assert!(
        u128::try_from(timeout_ms).unwrap() <= left_after_the_wait.as_millis(),
        "the statement timeout {timeout_ms} ms counts time spent waiting for BEGIN"
    );
}

/// The same without the library: a plain tokio-postgres query, with its statement timeout
/// set by hand (1 s). Dropping its future stops nobody: the query runs on in the server
/// until its statement timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_library_a_query_runs_on_after_the_caller_leaves() {
    let observer = connect().await;
    let mut client = connect().await;
    let tag = tag("off");
    let sql = stalled(&tag);
    let started = {
        let transaction = client.transaction().await.unwrap();
        transaction
            .batch_execute("SET LOCAL statement_timeout = 1000")
            .await
            .unwrap();
        let query = transaction.query(sql.as_str(), &[]);
        let waited = tokio::time::timeout(ms(100), query).await;
        assert!(waited.is_err());
        Instant::now()
        // The transaction's drop queues a ROLLBACK, which waits behind the query.
    };
    // Well after the caller left, the query is still running.
    tokio::time::sleep(ms(300)).await;
    assert!(
        running(&observer, &tag).await,
        "without the library the query runs on"
    );
    let gone = until(&observer, &tag, false).await;
    let after = gone.saturating_duration_since(started);
    eprintln!("caller left, without the library: the query ran on {after:?} in the database");
}

/// Whether a query with `tag` is waiting for a lock, seen from `observer`: its parse, which
/// opens the tables it reads, waits behind a lock another transaction holds.
/// Runs the query `sql` under `policy` the two ways a statement runs: through `session`, or
/// (`with_a_session` false) through `postgres::query` on `client`.
async fn query_by(
    with_a_session: bool,
    session: &mut Session<Client, NoTls>,
    client: &mut Client,
    policy: &StatementPolicy,
    sql: &str,
) -> Result<Vec<Row>, PgError> {
    if with_a_session {
        session.query(policy, sql, &[]).await
    } else {
        postgres::query(client, policy, sql, &[]).await
    }
}

/// [`query_by`] for a statement that returns no rows: `execute`.
async fn execute_by(
    with_a_session: bool,
    session: &mut Session<Client, NoTls>,
    client: &mut Client,
    policy: &StatementPolicy,
    sql: &str,
) -> Result<u64, PgError> {
    if with_a_session {
        session.execute(policy, sql, &[]).await
    } else {
        postgres::execute(client, policy, sql, &[]).await
    }
}

async fn waiting_for_a_lock(observer: &Client, tag: &str) -> bool {
    let row = observer
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' \
             AND pid <> pg_backend_pid() AND position($1 in query) > 0",
            &[&tag],
        )
        .await
        .unwrap();
    row.get::<_, i64>(0) > 0
}

/// Commits `lock`'s transaction (which holds a lock on `table`) 50 ms after `observer` sees a
/// query wait for a lock on it (the query's parse, reading `table`); fails when none does
/// within 10 s.
async fn release_once_waited_on(observer: &Client, table: &str, lock: Transaction<'_>) {
    let start = Instant::now();
    while !waiting_for_a_lock(observer, table).await {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the parse never waited for the lock"
        );
        tokio::time::sleep(ms(1)).await;
    }
    tokio::time::sleep(ms(50)).await;
    lock.commit().await.unwrap();
}

/// PostgreSQL times a statement's parse and its run apart, each with a statement timeout of
/// its own. A statement whose parse waits behind a lock (here an `ACCESS EXCLUSIVE` lock that
/// another transaction holds on a table it reads, released 50 ms after the parse is seen
/// waiting) must run with what is left of its timeout, not with the whole of it again: a
/// query dropped then (`postgres::query` sends no cancel) would run on past the deadline by
/// as long as the parse waited. The statement reads the timeout it runs with: under the
/// 1 000 ms decided, by at least the 50 ms the lock was held after the parse was seen waiting
/// (it read 1 000 when the run was given the whole timeout again). Both ways to run a query:
/// `postgres::query`, and a session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_whose_parse_waited_runs_with_what_is_left_of_its_timeout() {
    let observer = connect().await;
    let db = Database::new(&database_url().parse().unwrap(), NoTls).unwrap();
    let mut session = db.connect().await.unwrap();
    let policy = StatementPolicy::capped(ms(1_000)).with_floor(ms(1));
    for with_a_session in [false, true] {
        let table = tag("locked");
        let mut holder = connect().await;
        holder
            .batch_execute(&format!("CREATE TABLE {table} (x int)"))
            .await
            .unwrap();
        let lock = holder.transaction().await.unwrap();
        lock.batch_execute(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            .await
            .unwrap();

        let sql = format!(
            "SELECT (SELECT setting FROM pg_settings WHERE name = 'statement_timeout')::int, \
             (SELECT count(*) FROM {table})"
        );
        let mut client = connect().await;
        let query = async {
            let rows = query_by(with_a_session, &mut session, &mut client, &policy, &sql).await;
            rows.expect("the statement ran")[0].get::<_, i32>(0)
        };
        let release = release_once_waited_on(&observer, &table, lock);
        let (ran_with, ()) = scope_timeout(ms(5_000), async { tokio::join!(query, release) })
            .await
            .expect("inside its scope");
        eprintln!("session: {with_a_session}: the statement ran with {ran_with} ms of 1000");
        assert!(
            (1..=950).contains(&ran_with),
            "session: {with_a_session}: ran with a statement timeout of {ran_with} ms"
        );
        holder
            .batch_execute(&format!("DROP TABLE {table}"))
            .await
            .unwrap();
    }
}

/// PostgreSQL does not time a `COMMIT` (it turns the statement timeout off before it
/// commits), and deferred constraints are checked there: a constraint trigger that takes 3 s
/// ran untimed after the statement, for as long as it took, past the caller's deadline (the
/// free function sends no cancel, and the row was committed after the caller had left). They
/// are checked before the `COMMIT` instead, under what is left of the 300 ms timeout: the
/// statement ends as the library's timeout, and nothing is committed. (It ended as the 2 s
/// scope's `DeadlineExceeded`.) Both ways to run a statement: `postgres::execute`, and a
/// session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_constraints_are_checked_under_the_statements_timeout() {
    let db = Database::new(&database_url().parse().unwrap(), NoTls).unwrap();
    let mut session = db.connect().await.unwrap();
    let mut client = connect().await;
    let policy = StatementPolicy::capped(ms(300)).with_floor(ms(1));
    for with_a_session in [false, true] {
        let table = tag("deferred");
        let admin = connect().await;
        admin
            .batch_execute(&format!(
                "CREATE TABLE {table} (x int); \
                 CREATE FUNCTION {table}_check() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                   PERFORM pg_sleep(3); \
                   RETURN NULL; \
                 END $$; \
                 CREATE CONSTRAINT TRIGGER {table}_at_commit AFTER INSERT ON {table} \
                   DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {table}_check();"
            ))
            .await
            .unwrap();
        let sql = format!("INSERT INTO {table} VALUES (1)");
        let inserted = scope_timeout(
            ms(2_000),
            execute_by(with_a_session, &mut session, &mut client, &policy, &sql),
        )
        .await
        .expect("inside its scope");
        match inserted {
            Err(PgError::Deadline(Error::Timeout { after })) => assert_eq!(after, ms(300)),
            other => panic!("session: {with_a_session}: expected the timeout, got {other:?}"),
        }
        let rows: i64 = admin
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(rows, 0, "session: {with_a_session}: nothing is committed");
        admin
            .batch_execute(&format!(
                "DROP TABLE {table}; DROP FUNCTION {table}_check();"
            ))
            .await
            .unwrap();
    }
}

/// The check of the deferred constraints before the `COMMIT` gets what is left of the whole
/// statement timeout, after the parse and the run: a parse that waited 50 ms behind a lock
/// (as above) leaves the check at most 950 ms of 1 000 (it read 999, the whole timeout less
/// the run alone, when what was left was reckoned from the run's start). A deferred constraint
/// trigger notes the timeout the check runs with (a check that overran it ends with 57014:
/// `deferred_constraints_are_checked_under_the_statements_timeout`), and the command it ran
/// in: the check's `SET CONSTRAINTS ALL IMMEDIATE`, not the `COMMIT` (where, with no check,
/// it would run, and still read a timeout of at most 950). Both ways to run a statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deferred_check_gets_what_is_left_after_a_parse_that_waited() {
    let observer = connect().await;
    let db = Database::new(&database_url().parse().unwrap(), NoTls).unwrap();
    let mut session = db.connect().await.unwrap();
    let mut client = connect().await;
    let policy = StatementPolicy::capped(ms(1_000)).with_floor(ms(1));
    for with_a_session in [false, true] {
        let table = tag("checked");
        let mut holder = connect().await;
        holder
            .batch_execute(&format!(
                "CREATE TABLE {table} (x int); \
                 CREATE TABLE {table}_rows (n bigint); \
                 CREATE TABLE {table}_seen (ms int, during text); \
                 CREATE FUNCTION {table}_note() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                   INSERT INTO {table}_seen SELECT setting::int, current_query() \
                     FROM pg_settings WHERE name = 'statement_timeout'; \
                   RETURN NULL; \
                 END $$; \
                 CREATE CONSTRAINT TRIGGER {table}_checked AFTER INSERT ON {table}_rows \
                   DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {table}_note();"
            ))
            .await
            .unwrap();
        let lock = holder.transaction().await.unwrap();
        lock.batch_execute(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            .await
            .unwrap();
        let sql = format!("INSERT INTO {table}_rows SELECT count(*) FROM {table}");
        let insert = async {
            let inserted =
                execute_by(with_a_session, &mut session, &mut client, &policy, &sql).await;
            assert_eq!(inserted.expect("the statement ran and committed"), 1);
        };
        let release = release_once_waited_on(&observer, &table, lock);
        scope_timeout(ms(5_000), async { tokio::join!(insert, release) })
            .await
            .expect("inside its scope");
        let row = observer
            .query_one(&format!("SELECT ms, during FROM {table}_seen"), &[])
            .await
            .expect("the deferred trigger ran once");
        let (seen, during): (i32, String) = (row.get(0), row.get(1));
        eprintln!("session: {with_a_session}: the check ran with {seen} ms of 1000");
        assert!(
            during.contains("SET CONSTRAINTS ALL IMMEDIATE"),
            "session: {with_a_session}: the deferred trigger ran in {during:?}, not the check"
        );
        assert!(
            (1..=950).contains(&seen),
            "session: {with_a_session}: the check ran with a statement timeout of {seen} ms"
        );
        holder
            .batch_execute(&format!(
                "DROP TABLE {table}; DROP TABLE {table}_rows; DROP TABLE {table}_seen; \
                 DROP FUNCTION {table}_note();"
            ))
            .await
            .unwrap();
    }
}

/// A statement that relies on deferral within it (a function that inserts a child row before
/// its parent, under a `DEFERRABLE INITIALLY DEFERRED` foreign key) runs as it would without
/// the library: its constraints are checked after it, not at the end of each query inside it
/// (they would be, were they made immediate before it: 23503). Both ways to run a statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_relying_on_deferral_within_it_runs() {
    let db = Database::new(&database_url().parse().unwrap(), NoTls).unwrap();
    let mut session = db.connect().await.unwrap();
    let mut client = connect().await;
    let admin = connect().await;
    let table = tag("parent");
    admin
        .batch_execute(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY); \
             CREATE TABLE {table}_child (parent int REFERENCES {table} (id) \
               DEFERRABLE INITIALLY DEFERRED); \
             CREATE FUNCTION {table}_both(id int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN \
               INSERT INTO {table}_child VALUES (id); \
               INSERT INTO {table} VALUES (id); \
               RETURN id; \
             END $$;"
        ))
        .await
        .unwrap();
    for (id, with_a_session) in [(1, false), (2, true)] {
        let sql = format!("SELECT {table}_both({id})");
        let rows = scope_timeout(
            ms(5_000),
            query_by(with_a_session, &mut session, &mut client, &POLICY, &sql),
        )
        .await
        .expect("inside its scope")
        .unwrap_or_else(|error| panic!("session: {with_a_session}: {error:?}"));
        assert_eq!(rows[0].get::<_, i32>(0), id);
    }
    let children: i64 = admin
        .query_one(&format!("SELECT count(*) FROM {table}_child"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(children, 2);
    admin
        .batch_execute(&format!(
            "DROP TABLE {table}_child; DROP TABLE {table}; DROP FUNCTION {table}_both(int);"
        ))
        .await
        .unwrap();
}

/// A query that someone else cancels (an administrator's `pg_cancel_backend`) ends with
/// SQLSTATE 57014, as one whose statement timeout fires does; but long before its timeout
/// could fire (the server starts it after the timeout is decided), so it is the database's
/// error, not the library's timeout (it was reported as a timeout of the whole 10 s, a 504).
/// Both ways to run a query: `postgres::query`, and a session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_cancelled_by_someone_else_is_the_databases_error() {
    let observer = connect().await;
    let db = Database::new(&database_url().parse().unwrap(), NoTls).unwrap();
    let mut session = db.connect().await.unwrap();
    for with_a_session in [false, true] {
        let tag = tag("cancelled");
        let sql = stalled(&tag);
        let mut client = connect().await;
        let query = query_by(with_a_session, &mut session, &mut client, &POLICY, &sql);
        let cancel = async {
            until(&observer, &tag, true).await;
            observer
                .execute(
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity \
                     WHERE pid <> pg_backend_pid() AND position($1 in query) > 0",
                    &[&tag],
                )
                .await
                .unwrap();
        };
        let (result, ()) = scope_timeout(ms(20_000), async { tokio::join!(query, cancel) })
            .await
            .expect("inside its scope");
        match result {
            Err(PgError::Db(error)) => assert_eq!(
                error.code(),
                Some(&tokio_postgres::error::SqlState::QUERY_CANCELED),
                "session: {with_a_session}"
            ),
            other => {
                panic!("session: {with_a_session}: expected the database's error, got {other:?}")
            }
        }
    }
}
