//! sqlx queries under the deadline, against a real PostgreSQL: the statement timeout from the
//! time left, the query gone from `pg_stat_activity` when its future is dropped, the pool's
//! wait bounded, and a dropped query's cancel never reaching the next user of the connection.
//!
//! The database comes from `DEADLINE_TEST_DATABASE_URL`, as for the other database tests
//! (`eval "$(bash scripts/postgres.sh start)"`, or `scripts/test.sh`, which starts one).
//! Real sockets and a real server: nothing asserts a duration; each wait on the server is a
//! bounded poll, and the race runs `DEADLINE_PG_RACE_ITERATIONS` rounds (600 by default), as
//! `tests/postgres_race.rs` does. One test gives a connection back 300 ms into an attempt
//! under a 750 ms floor, and says what stall would fail it.

use deadline_core::statement::StatementPolicy;
use deadline_core::{Error, ms};
use deadline_tokio::scope_timeout;
use deadline_tokio::sqlx::{self as db, SqlxError};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Executor, Row};

/// At most 10 s per query: the statement timeout never ends these queries unless a test
/// sets a shorter cap.
const POLICY: StatementPolicy = StatementPolicy::capped(ms(10_000));
/// A statement timeout far beyond a test's wait for a query to go: with it, only the
/// library's cancel ends a 60 s query in time.
const FAR: StatementPolicy = StatementPolicy::capped(ms(60_000));

/// The cancels' counts are the process's (`sqlx::cancels`): the tests that send cancels take
/// turns, so that one's count is its own.
static CANCELS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn database_url() -> String {
    std::env::var("DEADLINE_TEST_DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "DEADLINE_TEST_DATABASE_URL is not set: these tests need a PostgreSQL server. \
             Start a throwaway one with `eval \"$(bash scripts/postgres.sh start)\"`, \
             or run `bash scripts/test.sh`, which does."
        )
    })
}

async fn pool(size: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .connect(&database_url())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to DEADLINE_TEST_DATABASE_URL: {e}"))
}

/// The queries tagged `tag` running, seen from `observer`.
async fn running(observer: &PgPool, tag: &str) -> i64 {
    sqlx::query(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
         AND pid <> pg_backend_pid() AND position($1 in query) > 0",
    )
    .bind(tag)
    .fetch_one(observer)
    .await
    .unwrap()
    .get(0)
}

/// Polls (at most 5 s, 10 ms apart) until `want` queries tagged `tag` run.
async fn until(observer: &PgPool, tag: &str, want: i64) -> bool {
    for _ in 0..500 {
        if running(observer, tag).await == want {
            return true;
        }
        tokio::time::sleep(ms(10)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_runs_with_the_statement_timeout_from_the_time_left() {
    let pool = pool(1).await;
    let rows = scope_timeout(
        ms(5_000),
        db::fetch_all(
            &pool,
            &POLICY,
            sqlx::query("SELECT $1::int + 1").bind(41_i32),
        ),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    assert_eq!(rows[0].get::<i32, _>(0), 42);
    // SET LOCAL inside the transaction: at most the 5 s left, less the margin.
    let rows = scope_timeout(
        ms(5_000),
        db::fetch_all(
            &pool,
            &POLICY,
            sqlx::query("SELECT current_setting('statement_timeout')"),
        ),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    let shown: String = rows[0].get(0);
    let millis: u64 = shown.trim_end_matches("ms").parse().unwrap();
    assert!((1..=4_995).contains(&millis), "{shown}");
    // And only there: outside, the session's own setting is untouched.
    let row = sqlx::query("SHOW statement_timeout")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(row.get::<String, _>(0), "0");
    let changed = scope_timeout(
        ms(5_000),
        db::execute(&pool, &POLICY, "SELECT * FROM generate_series(1, 3)"),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    assert_eq!(changed, 3);
    // The future is `Send`: a handler may spawn it.
    let spawned = tokio::spawn(async move {
        scope_timeout(ms(5_000), db::fetch_all(&pool, &POLICY, "SELECT 1"))
            .await
            .expect("inside its scope")
    });
    assert_eq!(spawned.await.unwrap().unwrap().len(), 1);
}

/// A database's error answers the caller by its SQLSTATE: a unique violation is the
/// request at fault (409, `ALREADY_EXISTS`), bad input too (400, `INVALID_ARGUMENT`), and
/// only what the database does not name as the caller's is the service failing (500,
/// `INTERNAL`).
#[cfg(all(feature = "tonic", feature = "tower"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_error_answers_by_its_sqlstate() {
    let pool = pool(1).await;
    let table = format!("deadline_sqlx_unique_{}", std::process::id());
    sqlx::raw_sql(&format!("CREATE TABLE {table} (id int PRIMARY KEY)"))
        .execute(&pool)
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
        let failure = || async {
            scope_timeout(ms(5_000), db::execute(&pool, &POLICY, sql.as_str()))
                .await
                .expect("inside its scope")
                .unwrap_err()
        };
        let error = failure().await;
        assert!(matches!(error, SqlxError::Db(_)), "{sql}: {error:?}");
        assert_eq!(tonic::Status::from(error).code(), code, "{sql}");
        assert_eq!(http::StatusCode::from(failure().await), status, "{sql}");
    }
    sqlx::raw_sql(&format!("DROP TABLE {table}"))
        .execute(&pool)
        .await
        .unwrap();
}

/// Inside a dependency's call, a database's error is read by its SQLSTATE (`sqlx::classify`):
/// a duplicate key is final, one attempt and the database's error, however many retries the
/// policy allows; a serialization failure (its transaction rolled back, nothing done) runs
/// again, even for a call that is not idempotent. (The default classifier reads every error
/// as a failure a retry may fix.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_error_in_a_dependency_call_is_read_by_its_sqlstate() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use deadline_core::policy::Backoff;
    use deadline_core::{CallError, Policy};
    use deadline_tokio::Dependency;

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
    let pool = &pool(1).await;
    let table = format!("deadline_sqlx_dependency_{}", std::process::id());
    sqlx::raw_sql(&format!(
        "CREATE TABLE {table} (id int PRIMARY KEY); INSERT INTO {table} VALUES (1)"
    ))
    .execute(pool)
    .await
    .unwrap();

    let insert = &format!("INSERT INTO {table} VALUES (1)");
    let tries = &AtomicUsize::new(0);
    let called = scope_timeout(
        ms(5_000),
        INSERTS
            .run(move |_| async move {
                tries.fetch_add(1, Ordering::SeqCst);
                db::execute(pool, &POLICY, insert.as_str()).await
            })
            .classify(db::classify),
    )
    .await
    .expect("inside its scope");
    sqlx::raw_sql(&format!("DROP TABLE {table}"))
        .execute(pool)
        .await
        .unwrap();
    match called {
        Err(CallError::Attempt(SqlxError::Db(sqlx::Error::Database(error)))) => {
            assert_eq!(error.code().as_deref(), Some("23505"));
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
                db::execute(pool, &POLICY, sql).await
            })
            .classify(db::classify),
    )
    .await
    .expect("inside its scope");
    assert!(called.is_ok(), "{called:?}");
    assert_eq!(tries.load(Ordering::SeqCst), 2);
    assert_eq!(PAYMENTS.counters().snapshot().retries, 1);
}

/// PostgreSQL does not time a `COMMIT` (it turns the statement timeout off before it
/// commits), and deferred constraints are checked there: a constraint trigger that takes 3 s
/// ran untimed after the statement, until the caller's deadline cut it (its cancel). They are
/// checked before the `COMMIT` instead, under what is left of the 300 ms timeout: the
/// statement ends as the library's timeout, and nothing is committed. (It ended as the 2 s
/// scope's `DeadlineExceeded`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_constraints_are_checked_under_the_statements_timeout() {
    let pool = pool(1).await;
    let policy = StatementPolicy::capped(ms(300)).with_floor(ms(1));
    let table = format!("deadline_sqlx_deferred_{}", std::process::id());
    sqlx::raw_sql(&format!(
        "CREATE TABLE {table} (x int); \
         CREATE FUNCTION {table}_check() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           PERFORM pg_sleep(3); \
           RETURN NULL; \
         END $$; \
         CREATE CONSTRAINT TRIGGER {table}_at_commit AFTER INSERT ON {table} \
           DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {table}_check();"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let sql = format!("INSERT INTO {table} VALUES (1)");
    let inserted = scope_timeout(ms(2_000), db::execute(&pool, &policy, sql.as_str()))
        .await
        .expect("inside its scope");
    match inserted {
        Err(SqlxError::Deadline(Error::Timeout { after })) => assert_eq!(after, ms(300)),
        other => panic!("expected the timeout, got {other:?}"),
    }
    let rows: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 0, "nothing is committed");
    sqlx::raw_sql(&format!(
        "DROP TABLE {table}; DROP FUNCTION {table}_check();"
    ))
    .execute(&pool)
    .await
    .unwrap();
}

/// Statements that rely on deferral within them (a child row inserted before its parent,
/// under a `DEFERRABLE INITIALLY DEFERRED` foreign key: in a function, and as two statements
/// in one string, which sqlx sends as one simple query) run as they would without the library:
/// their constraints are checked after them, not at the end of each query inside them (they
/// would be, were they made immediate before: 23503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_relying_on_deferral_within_them_run() {
    let pool = pool(1).await;
    let table = format!("deadline_sqlx_parent_{}", std::process::id());
    sqlx::raw_sql(&format!(
        "CREATE TABLE {table} (id int PRIMARY KEY); \
         CREATE TABLE {table}_child (parent int REFERENCES {table} (id) \
           DEFERRABLE INITIALLY DEFERRED); \
         CREATE FUNCTION {table}_both(id int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN \
           INSERT INTO {table}_child VALUES (id); \
           INSERT INTO {table} VALUES (id); \
           RETURN id; \
         END $$;"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let in_a_function = format!("SELECT {table}_both(1)");
    let rows = scope_timeout(
        ms(5_000),
        db::fetch_all(&pool, &POLICY, in_a_function.as_str()),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    assert_eq!(rows[0].get::<i32, _>(0), 1);
    let two_statements =
        format!("INSERT INTO {table}_child VALUES (2); INSERT INTO {table} VALUES (2)");
    scope_timeout(
        ms(5_000),
        db::execute(&pool, &POLICY, two_statements.as_str()),
    )
    .await
    .expect("inside its scope")
    .unwrap();
    let children: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}_child"))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(children, 2);
    sqlx::raw_sql(&format!(
        "DROP TABLE {table}_child; DROP TABLE {table}; DROP FUNCTION {table}_both(int);"
    ))
    .execute(&pool)
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlstate_57014_is_the_librarys_timeout() {
    let pool = pool(1).await;
    let short = StatementPolicy::capped(ms(50));
    let result = scope_timeout(
        ms(5_000),
        db::fetch_all(&pool, &short, "SELECT pg_sleep(5) /* sqlx_timeout */"),
    )
    .await
    .expect("inside its scope");
    match result {
        Err(SqlxError::Deadline(Error::Timeout { after })) => assert_eq!(after, ms(50)),
        other => panic!("expected the timeout, got {other:?}"),
    }
    // Rolled back: the connection answers.
    let row = sqlx::query("SELECT 1").fetch_one(&pool).await.unwrap();
    assert_eq!(row.get::<i32, _>(0), 1);
}

/// A query as a dependency's attempt (`Dependency::run`): its statement timeout, the
/// attempt's 200 ms less a 60 ms margin, fires about 60 ms before the attempt's own end. The
/// call's error is the library's timeout (504), counted as one, not a failed dependency (502).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_timeout_in_a_dependency_call_is_the_calls_timeout() {
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::{CallError, Policy};
    use deadline_tokio::Dependency;

    static ORDERS: Dependency<DeadlineOnly> =
        Dependency::deadline_only(Policy::required("orders").with_cap(ms(200)));
    const MARGIN: StatementPolicy = StatementPolicy::capped(ms(10_000)).with_margin(ms(60));
    let pool = pool(1).await;
    let called = scope_timeout(
        ms(5_000),
        ORDERS.run(|_| db::fetch_all(&pool, &MARGIN, "SELECT pg_sleep(5) /* sqlx_dependency */")),
    )
    .await
    .expect("inside its scope");
    match called {
        Err(CallError::Library(Error::Timeout { after })) => assert!(after <= ms(200)),
        other => panic!("the call's timeout, not {other:?}"),
    }
    assert_eq!(ORDERS.counters().snapshot().timeouts, 1);
}

/// A query of a dependency's attempt that waited for the pool's one connection until too little
/// of the attempt's time was left for it was never sent: the attempt ran out of its own time
/// (its 1 s cap, with 4 s of the call's left) and the call ends with its timeout, not as a
/// failed dependency, which the breaker would count. (The check made before the wait, which
/// let it wait, sends nothing either.) The connection is given back
/// 300 ms after the attempt starts, within its 1 s: 700 ms or less are left then, under the
/// 750 ms floor; only a machine stalled 700 ms could let the attempt's own timeout come
/// first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_that_waited_until_too_late_was_never_sent() {
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::{CallError, Policy};
    use deadline_tokio::Dependency;

    static LATE: Dependency<DeadlineOnly> =
        Dependency::deadline_only(Policy::required("late").with_cap(ms(1_000)));
    const FLOORED: StatementPolicy = StatementPolicy::capped(ms(10_000)).with_floor(ms(750));
    let pool = pool(1).await;
    let mut taken = Some(pool.acquire().await.unwrap());
    let mut giver = None;
    let called = scope_timeout(
        ms(5_000),
        LATE.run(|_| {
            // Started with the attempt, once its 1 s runs.
            let taken = taken
                .take()
                .expect("a deadline-only call makes one attempt");
            giver = Some(tokio::spawn(async move {
                tokio::time::sleep(ms(300)).await;
                drop(taken);
            }));
            db::fetch_all(&pool, &FLOORED, "SELECT 1")
        }),
    )
    .await
    .expect("inside its scope");
    giver.expect("the attempt ran").await.unwrap();
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

/// With less time left than the floor, a query is not started: whether the pool has a
/// connection to give (a second is under the 10 s floor however long the pool takes to hand it
/// over), or its one connection is taken: no connection is waited for that could not be used
/// (it used to be waited for until the deadline, which then ended the query's wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_is_not_started_with_too_little_time_left() {
    let pool = pool(1).await;
    let policy = StatementPolicy::capped(ms(10_000)).with_floor(ms(10_000));
    for taken in [false, true] {
        let _taken = if taken {
            Some(pool.acquire().await.unwrap())
        } else {
            None
        };
        let result = scope_timeout(ms(1_000), db::fetch_all(&pool, &policy, "SELECT 1"))
            .await
            .expect("inside its scope");
        assert!(
            matches!(
                result,
                Err(SqlxError::Deadline(Error::InsufficientTime { .. }))
            ),
            "connection taken: {taken}; {result:?}"
        );
    }
}

/// The pool's one connection is taken: the wait for it ends at the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_for_a_pooled_connection_is_bounded_by_the_deadline() {
    let pool = pool(1).await;
    let taken = pool.acquire().await.unwrap();
    // The pool's wait ends at the scope's deadline; the scope's own timer, at the same
    // instant, may be the one that fires first. Either is the deadline.
    let result = scope_timeout(ms(100), db::fetch_all(&pool, &POLICY, "SELECT 1")).await;
    assert!(
        matches!(
            result,
            Ok(Err(SqlxError::Deadline(Error::DeadlineExceeded))) | Err(Error::DeadlineExceeded)
        ),
        "{result:?}"
    );
    drop(taken);
    let rows = scope_timeout(ms(5_000), db::fetch_all(&pool, &POLICY, "SELECT 1"))
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(rows.len(), 1);
}

/// The caller leaves at 100 ms: the query, a 60 s sleep under a 60 s statement timeout, is
/// cancelled on the server (gone within the test's wait, which nothing else would end it in),
/// and the pool's one connection serves the next query once the cancel has settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_query_is_gone_from_the_server() {
    let _alone = CANCELS.lock().await;
    let observer = pool(1).await;
    let pool = pool(1).await;
    let tag = "sqlx_dropped_3a9c";
    let sql = format!("SELECT pg_sleep(60) /* {tag} */");
    let before = db::cancels();
    let dropped = tokio::time::timeout(
        ms(100),
        scope_timeout(ms(60_000), db::fetch_all(&pool, &FAR, sql.as_str())),
    )
    .await;
    assert!(dropped.is_err(), "the caller left at 100 ms");
    assert!(
        until(&observer, tag, 0).await,
        "the dropped query was cancelled"
    );
    let row = sqlx::query("SELECT 1").fetch_one(&pool).await.unwrap();
    assert_eq!(row.get::<i32, _>(0), 1);
    let after = db::cancels();
    assert!(after.sent() > before.sent(), "{before:?} -> {after:?}");
    assert_eq!(after.failed(), before.failed());
}

/// The race of a cancel with the next query, on a pool of one connection: queries dropped
/// within a millisecond or two of their end (`pg_sleep` of 3.0 to 7.0 ms, dropped at 5 ms),
/// and an unrelated query at once on the pool's one connection, thousands of times: it never
/// fails with 57014.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_querys_cancel_never_reaches_the_next_user_of_the_connection() {
    let _alone = CANCELS.lock().await;
    let pool = pool(1).await;
    let rounds = std::env::var("DEADLINE_PG_RACE_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(600_usize);
    assert!(rounds > 0, "DEADLINE_PG_RACE_ITERATIONS must be at least 1");
    let (mut dropped, mut answered, mut own_cancelled, mut unrelated_cancelled) = (0, 0, 0, 0);
    for i in 0..rounds {
        let sql = format!("SELECT pg_sleep({}e-6)", 3_000 + (i % 41) * 100);
        match tokio::time::timeout(ms(5), db::fetch_all(&pool, &POLICY, sql.as_str())).await {
            Ok(Ok(_)) => answered += 1,
            Ok(Err(SqlxError::Deadline(Error::Timeout { .. }))) => own_cancelled += 1,
            Ok(Err(e)) => panic!("the query failed otherwise: {e:?}"),
            Err(_) => dropped += 1,
        }
        let mut conn = pool.acquire().await.unwrap();
        match conn.execute("SELECT pg_sleep(0.010)").await {
            Ok(_) => {}
            Err(e) if e.as_database_error().and_then(|d| d.code()).as_deref() == Some("57014") => {
                unrelated_cancelled += 1;
            }
            Err(e) => panic!("the unrelated query failed otherwise: {e:?}"),
        }
    }
    let cancels = db::cancels();
    eprintln!(
        "sqlx, pool of one: {rounds} rounds, {dropped} dropped mid-query, {answered} answered; \
         unrelated queries cancelled: {unrelated_cancelled}; the library's own queries \
         cancelled: {own_cancelled}; cancels: {cancels:?}"
    );
    assert!(
        dropped >= rounds / 10,
        "too few queries were dropped mid-flight"
    );
    assert_eq!((unrelated_cancelled, own_cancelled), (0, 0));
    assert_eq!(cancels.failed(), 0, "{cancels:?}");
    // Every settle answered: no connection was closed.
    assert_eq!(cancels.closed(), 0, "{cancels:?}");
}
