//! Database queries left behind, seen in PostgreSQL's `pg_stat_activity`: a query whose
//! future is dropped at the deadline keeps running on the server unless the server was told
//! when to stop. With the statement timeout computed from the time left
//! ([`decide_statement`](deadline_tokio::low_level::decide_statement)), it stops by itself.
//!
//! These tests need a PostgreSQL server, named by `DEADLINE_TEST_DATABASE_URL`, as the other
//! database tests do: `scripts/test.sh` starts a throwaway one on loopback
//! (`scripts/postgres.sh`). Without it they fail, naming the variable. Real time and a real
//! server: nothing is timed; each wait on the server is a bounded poll, and a query the
//! statement timeout must stop sleeps 60 s, far beyond any poll, so that one gone within a
//! poll was stopped.

use deadline_core::statement::{StatementDecision, StatementPolicy};
use deadline_core::{Clock, Deadline, ms};
use deadline_tokio::low_level::decide_statement;
use deadline_tokio::low_level::with_deadline;
use deadline_tokio::scope_timeout;
use deadline_tokio::time::TokioClock;
use tokio_postgres::{Client, NoTls};

/// Queries of the tests: at most 5 s, never started with under 20 ms left.
const QUERIES: StatementPolicy = StatementPolicy::capped(ms(5_000)).with_floor(ms(20));

async fn connect() -> Client {
    let config = std::env::var("DEADLINE_TEST_DATABASE_URL").expect(
        "DEADLINE_TEST_DATABASE_URL: start a server with `eval \"$(bash scripts/postgres.sh start)\"`",
    );
    let (client, connection) = tokio_postgres::connect(&config, NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(connection);
    client
}

/// The `pg_sleep` queries still running on the server with this `tag` in their text.
async fn running(observer: &Client, tag: &str) -> i64 {
    let pattern = format!("%{tag}%");
    let row = observer
        .query_one(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE state = 'active' AND query LIKE $1 AND query NOT LIKE '%pg_stat_activity%'",
            &[&pattern],
        )
        .await
        .expect("read pg_stat_activity");
    row.get(0)
}

/// Polls until no query tagged `tag` runs, at most `polls` times 20 ms apart; returns whether
/// it got there.
async fn gone(observer: &Client, tag: &str, polls: u32) -> bool {
    for _ in 0..polls {
        if running(observer, tag).await == 0 {
            return true;
        }
        tokio::time::sleep(ms(20)).await;
    }
    false
}

/// Without a statement timeout, dropping the query's future at the deadline leaves the
/// query running on the server: the problem.
#[tokio::test]
async fn a_dropped_query_without_a_statement_timeout_is_left_behind() {
    let observer = connect().await;
    let client = connect().await;
    let tag = "left_behind_7f3a";
    let query = format!("SELECT pg_sleep(3) /* {tag} */");
    let dropped = tokio::time::timeout(ms(200), client.simple_query(&query)).await;
    assert!(
        dropped.is_err(),
        "the query was cut off on the client at 200 ms"
    );
    assert_eq!(
        running(&observer, tag).await,
        1,
        "the dropped query still runs on the server"
    );
    // Clean up: cancel it, so that the server is left as it was found.
    client
        .cancel_token()
        .cancel_query(NoTls)
        .await
        .expect("cancel the query");
    assert!(
        gone(&observer, tag, 100).await,
        "the cancelled query still runs"
    );
}

/// With the statement timeout from the time left, the server stops the query at the
/// deadline by itself: after the request's future is dropped nothing is left running (at
/// most the statement timeout later), and a query that finishes gets its error,
/// `query_canceled` (57014).
#[tokio::test]
async fn the_statement_timeout_from_the_time_left_leaves_nothing_behind() {
    let observer = connect().await;
    let mut client = connect().await;

    // Awaited to the end: the server cancels it at the statement timeout. The deadline is
    // set without bounding the work (`with_deadline`): the server's own error is awaited,
    // however late a loaded machine delivers it.
    let tag = "awaited_5c1e";
    let outcome = with_deadline(Deadline::after(TokioClock.now(), ms(1_000)), async {
        let StatementDecision::Set(timeout) = decide_statement(&QUERIES) else {
            panic!("1 s left is enough to start");
        };
        assert!(timeout.as_duration() <= ms(1_000));
        let tx = client.transaction().await.expect("begin");
        tx.batch_execute(&timeout.to_string())
            .await
            .expect("set the timeout");
        let result = tx
            .simple_query(&format!("SELECT pg_sleep(60) /* {tag} */"))
            .await;
        drop(tx);
        result
    })
    .await;
    let error = outcome.expect_err("the server stopped the query");
    assert_eq!(
        error.code(),
        Some(&tokio_postgres::error::SqlState::QUERY_CANCELED)
    );
    assert!(gone(&observer, tag, 250).await);

    // Dropped on the client early (the caller gave up at 100 ms), with 300 ms of deadline:
    // the query still runs then, and the server stops it at its statement timeout.
    let tag = "dropped_9b2d";
    let dropped = tokio::time::timeout(
        ms(100),
        scope_timeout(ms(300), async {
            let StatementDecision::Set(timeout) = decide_statement(&QUERIES) else {
                panic!("300 ms left is enough to start");
            };
            assert!(timeout.as_duration() <= ms(300));
            let tx = client.transaction().await.expect("begin");
            tx.batch_execute(&timeout.to_string())
                .await
                .expect("set the timeout");
            tx.simple_query(&format!("SELECT pg_sleep(60) /* {tag} */"))
                .await
        }),
    )
    .await;
    assert!(dropped.is_err(), "the request was dropped at 100 ms");
    assert_eq!(
        running(&observer, tag).await,
        1,
        "dropping the future does not stop it"
    );
    // The statement timeout was at most 300 ms: within a poll of some 5 s, which the
    // query's 60 s sleep would outlast, nothing is left.
    assert!(
        gone(&observer, tag, 250).await,
        "the dropped query was left running"
    );
}
