//! A dropped query's cancel over TLS, against a PostgreSQL server that accepts TLS connections
//! alone (`ssl = on`, `hostssl` the one line of `pg_hba.conf`), with a self-signed certificate
//! this test makes.
//!
//! The test starts that server itself, with `scripts/postgres.sh start-tls` (PostgreSQL's
//! server programs: Debian's `postgresql`), and stops it at the end. Real sockets and a real
//! server: nothing is timed; each wait on the server is a bounded poll.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use deadline_core::ms;
use deadline_core::statement::StatementPolicy;
use deadline_tokio::postgres::{Database, PgError, Session};
use tokio_postgres::config::SslMode;
use tokio_postgres::{Client, Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

/// At most 10 s per query: the statement timeout never ends these queries.
const POLICY: StatementPolicy = StatementPolicy::capped(ms(10_000));

/// A throwaway TLS-only server, stopped when dropped.
struct TlsServer {
    dir: String,
    port: u16,
    cert_der: Vec<u8>,
    certs: PathBuf,
}

impl TlsServer {
    fn start() -> TlsServer {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let certs = std::env::temp_dir().join(format!(
            "deadline-tls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&certs).unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        std::fs::write(certs.join("server.crt"), made.cert.pem()).unwrap();
        std::fs::write(certs.join("server.key"), made.key_pair.serialize_pem()).unwrap();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("start-tls")
            .arg(certs.join("server.crt"))
            .arg(certs.join("server.key"))
            .output()
            .expect("run scripts/postgres.sh");
        assert!(
            out.status.success(),
            "scripts/postgres.sh start-tls failed (it needs PostgreSQL's server programs): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let exports = String::from_utf8(out.stdout).unwrap();
        let value = |name: &str| {
            exports
                .lines()
                .find_map(|line| line.strip_prefix(&format!("export {name}=")))
                .unwrap_or_else(|| panic!("no {name} in {exports}"))
                .to_owned()
        };
        let url = value("DEADLINE_TEST_DATABASE_URL");
        let port = url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("no port in {url}"));
        TlsServer {
            dir: value("DEADLINE_PG_DIR"),
            port,
            cert_der: made.cert.der().to_vec(),
            certs,
        }
    }

    /// The server over TLS, its certificate checked against `localhost`, at 127.0.0.1.
    fn config(&self) -> Config {
        let mut config = Config::new();
        config
            .host("localhost")
            .hostaddr([127, 0, 0, 1].into())
            .port(self.port)
            .user("postgres")
            .dbname("postgres")
            .ssl_mode(SslMode::Require);
        config
    }

    /// A TLS connector that trusts this server's certificate alone.
    fn tls(&self) -> MakeRustlsConnect {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(
                self.cert_der.clone(),
            ))
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        MakeRustlsConnect::new(config)
    }

    async fn connect(&self) -> Client {
        let (client, connection) = self.config().connect(self.tls()).await.unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh");
        let _ = Command::new("bash")
            .arg(script)
            .arg("stop")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.certs);
    }
}

/// The `pg_sleep` queries tagged `tag` still running, seen from `observer`.
async fn running(observer: &Client, tag: &str) -> i64 {
    observer
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
             AND pid <> pg_backend_pid() AND position($1 in query) > 0",
            &[&tag],
        )
        .await
        .unwrap()
        .get(0)
}

/// Polls (at most 5 s, 10 ms apart) until `want` queries tagged `tag` run.
async fn until(observer: &Client, tag: &str, want: i64) -> bool {
    for _ in 0..500 {
        if running(observer, tag).await == want {
            return true;
        }
        tokio::time::sleep(ms(10)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_querys_cancel_goes_over_the_connections_tls() {
    let server = TlsServer::start();
    let observer = server.connect().await;

    // The server accepts TLS alone: a plaintext connection is refused.
    let mut plain = server.config();
    plain.ssl_mode(SslMode::Disable);
    let refused = plain.connect(NoTls).await;
    assert!(refused.is_err(), "a plaintext connection was accepted");
    let ssl: bool = observer
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ssl, "the observer's connection is TLS");

    // Before: a cancel with `NoTls` on a `sslmode=require` connection fails (and a caller
    // that drops the error never knows), and the query runs on.
    let client = server.connect().await;
    let token = client.cancel_token();
    let tag = "tls_notls_cancel_4e1b";
    let sql = format!("SELECT pg_sleep(5) /* {tag} */");
    let query = tokio::spawn(async move { client.simple_query(&sql).await.map(|_| ()) });
    assert!(until(&observer, tag, 1).await, "the query started");
    let failed = token.cancel_query(NoTls).await;
    assert!(
        failed.is_err(),
        "a NoTls cancel on a TLS-only server: {failed:?}"
    );
    tokio::time::sleep(ms(300)).await;
    assert_eq!(running(&observer, tag).await, 1, "the query runs on");
    // The same cancel with the connection's connector stops it.
    token.cancel_query(server.tls()).await.unwrap();
    assert!(until(&observer, tag, 0).await, "the query was cancelled");
    let ended = query.await.unwrap();
    assert!(ended.is_err(), "the query ended by the cancel: {ended:?}");

    // With a session: the query dropped mid-flight is cancelled over TLS, and is gone.
    let db = Database::new(&server.config(), server.tls()).unwrap();
    let mut session = db.connect().await.unwrap();
    let tag = "tls_session_cancel_8c2d";
    let sql = format!("SELECT pg_sleep(5) /* {tag} */");
    let dropped = tokio::time::timeout(ms(200), session.query(&POLICY, &sql, &[])).await;
    assert!(dropped.is_err(), "the caller left at 200 ms");
    assert!(
        until(&observer, tag, 0).await,
        "the dropped query was cancelled"
    );
    let rows = session.query(&POLICY, "SELECT 1", &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, i32>(0), 1);
    let cancels = db.cancels();
    assert_eq!(
        (cancels.sent(), cancels.failed(), cancels.closed()),
        (1, 0, 0)
    );
}

/// Whether backend `pid` is gone from `observer`'s view within 5 s (the client sees its end
/// a moment before the server's view does).
async fn backend_ends(observer: &Client, pid: i32) -> bool {
    for _ in 0..500 {
        let alive: i64 = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .unwrap()
            .get(0);
        if alive == 0 {
            return true;
        }
        tokio::time::sleep(ms(10)).await;
    }
    false
}

/// Runs a second's query tagged `tag` on `session`, whose database cannot cancel it, and drops
/// it at 200 ms; waits, seen from `observer`, until the query has ended; and checks that the
/// session has no connection any more: it says so, rather than handing back the closed one,
/// whose next query failed as a database error.
async fn dropped_with_a_failed_cancel<C: Send + 'static>(
    session: &mut Session<C, NoTls>,
    observer: &Client,
    policy: &StatementPolicy,
    tag: &str,
) {
    let sql = format!("SELECT pg_sleep(1) /* {tag} */");
    let dropped = tokio::time::timeout(ms(200), session.query(policy, &sql, &[])).await;
    assert!(dropped.is_err(), "the caller left at 200 ms");
    assert!(until(observer, tag, 0).await, "the query ended");
    let next = session.query(policy, "SELECT 1", &[]).await;
    assert!(
        matches!(&next, Err(PgError::Lost)),
        "the connection was closed: {next:?}"
    );
}

/// A database given the wrong connector (`NoTls` for TLS connections) cannot cancel: the
/// failure is counted, and the connection, whose query may run on and whose state is
/// unknown, is closed rather than reused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_fails_is_counted_and_its_connection_closed() {
    let server = TlsServer::start();
    let observer = server.connect().await;
    let db = Database::new(&server.config(), NoTls).unwrap();
    let mut session = db.session_with(server.connect().await, |client| client);
    // The query runs to its end (1 s); then the connection's backend is ended.
    dropped_with_a_failed_cancel(&mut session, &observer, &POLICY, "tls_failed_cancel_2f7a").await;
    let cancels = db.cancels();
    assert_eq!(
        (cancels.sent(), cancels.failed(), cancels.closed()),
        (0, 1, 1)
    );
}

/// As above, but the dropped query runs into its own statement timeout (500 ms) once its
/// cancel has failed: that error aborts its transaction, where PostgreSQL refuses every
/// statement but the transaction's end (SQLSTATE 25P02). The backend is still ended, so the
/// connection is closed as counted, not handed back inside the aborted transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_cancels_connection_is_closed_when_its_query_times_out_on_its_own() {
    const SHORT: StatementPolicy = StatementPolicy::capped(ms(500));
    let server = TlsServer::start();
    let observer = server.connect().await;
    let db = Database::new(&server.config(), NoTls).unwrap();
    let mut session = db.session_with(server.connect().await, |client| client);
    let pid: i32 = session
        .query(&SHORT, "SELECT pg_backend_pid()", &[])
        .await
        .unwrap()[0]
        .get(0);
    // The query ends at its statement timeout (500 ms); then the connection's backend is ended.
    let tag = "tls_failed_cancel_timed_out_8c1d";
    dropped_with_a_failed_cancel(&mut session, &observer, &SHORT, tag).await;
    assert!(backend_ends(&observer, pid).await, "the backend was ended");
    let cancels = db.cancels();
    assert_eq!(
        (cancels.sent(), cancels.failed(), cancels.closed()),
        (0, 1, 1)
    );
}

/// As above, on a pooled connection (deadpool, one connection) whose session has taken a
/// role that may not end its own backend (`SET ROLE` from a superuser login to a plain
/// role: `pg_terminate_backend` refuses, 42501). The backend is ended all the same, by the
/// server: the connection sits idle in a transaction past a 1 ms
/// `idle_in_transaction_session_timeout`, which any role may set; and the pool makes a new
/// connection. (Before, the refusal was taken for the end, and the live connection, whose
/// failed cancel could still land on a later query, went back to the pool.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_cancels_pooled_connection_is_closed_when_its_role_may_not_end_it() {
    const SHORT: StatementPolicy = StatementPolicy::capped(ms(500));
    let server = TlsServer::start();
    let observer = server.connect().await;
    observer
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE deadline_plain NOLOGIN; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$",
        )
        .await
        .unwrap();
    let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(
        server.config(),
        server.tls(),
    ))
    .max_size(1)
    .build()
    .unwrap();
    let object = pool.get().await.unwrap();
    object
        .batch_execute("SET ROLE deadline_plain")
        .await
        .unwrap();
    let refused = object
        .batch_execute("SELECT pg_terminate_backend(pg_backend_pid())")
        .await
        .expect_err("the plain role may not end a superuser's backend");
    assert_eq!(
        refused.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    );
    let pid: i32 = object
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    // A database given the wrong connector (`NoTls`) cannot cancel.
    let db = Database::new(&server.config(), NoTls).unwrap();
    {
        let mut session = db.session_with(object, |object| object);
        let tag = "tls_failed_cancel_plain_role_5e2b";
        dropped_with_a_failed_cancel(&mut session, &observer, &SHORT, tag).await;
    }
    // The pool's one connection, once the old one is back or gone: a new one.
    let next = tokio::time::timeout(ms(5_000), pool.get())
        .await
        .expect("the pool has its connection back within 5 s")
        .unwrap();
    let next_pid: i32 = next
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_ne!(
        next_pid, pid,
        "the old connection, alive, was handed out again"
    );
    assert!(
        backend_ends(&observer, pid).await,
        "the old backend was ended"
    );
}
