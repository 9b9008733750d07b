//! A dropped query's cancel when the way to the server is not one plain socket: an address
//! that leads to two servers (a load balancer, a name for several hosts), and a connection
//! whose network goes silent once its query is sent.
//!
//! A proxy on loopback stands between the library and PostgreSQL: its first connection goes
//! to the test server (`DEADLINE_TEST_DATABASE_URL`, as the other database tests), the later
//! ones to the server its route names; it can stop forwarding on a connection (holding its
//! sockets open, so nothing fails, it only goes silent). The second server is started here
//! with `scripts/postgres.sh start` and stopped at the end. Real sockets and real servers:
//! nothing asserts a duration; the scopes' bounds are stated where they are set.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use deadline_core::ms;
use deadline_core::statement::StatementPolicy;
use deadline_tokio::postgres::{Database, PgError};
use deadline_tokio::scope_timeout;
use sqlx::Connection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_postgres::config::Host;
use tokio_postgres::{Config, NoTls};

/// At most 10 s per query: the statement timeout never ends these queries.
const POLICY: StatementPolicy = StatementPolicy::capped(ms(10_000));

/// The test server's configuration.
fn test_server() -> Config {
    std::env::var("DEADLINE_TEST_DATABASE_URL")
        .unwrap_or_else(|_| {
            panic!(
                "DEADLINE_TEST_DATABASE_URL is not set: these tests need a PostgreSQL server. \
                 Start a throwaway one with `eval \"$(bash scripts/postgres.sh start)\"`, \
                 or run `bash scripts/test.sh`, which does."
            )
        })
        .parse()
        .expect("DEADLINE_TEST_DATABASE_URL is a postgres:// URL")
}

/// Where `config` connects: its one TCP host and port.
fn address(config: &Config) -> SocketAddr {
    let host = match config.get_hosts() {
        [Host::Tcp(host)] => host.clone(),
        hosts => panic!("one TCP host expected, not {hosts:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let ip = if host == "localhost" {
        "127.0.0.1".to_owned()
    } else {
        host
    };
    format!("{ip}:{port}").parse().expect("a loopback address")
}

/// `config` with its host and port replaced by `to`.
fn through(config: &Config, to: SocketAddr) -> Config {
    let mut through = Config::new();
    through
        .host(to.ip().to_string())
        .port(to.port())
        .user(config.get_user().unwrap_or("postgres"))
        .dbname(config.get_dbname().unwrap_or("postgres"));
    if let Some(password) = config.get_password() {
        through.password(password);
    }
    through
}

/// A second throwaway server, stopped when dropped.
struct SecondServer {
    dir: String,
    config: Config,
}

impl SecondServer {
    fn start() -> SecondServer {
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .output()
            .expect("run scripts/postgres.sh");
        assert!(
            out.status.success(),
            "scripts/postgres.sh start failed (it needs PostgreSQL's server programs): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let exports = String::from_utf8(out.stdout).unwrap();
        let value = |name: &str| {
            exports
                .lines()
                .find_map(|line| line.strip_prefix(&format!("export {name}=")))
                .unwrap_or_else(|| panic!("no {name} in {exports}"))
                .trim_matches('\'')
                .to_owned()
        };
        // The server is stopped from here on, whatever fails next.
        let mut server = SecondServer {
            dir: value("DEADLINE_PG_DIR"),
            config: Config::new(),
        };
        server.config = value("DEADLINE_TEST_DATABASE_URL")
            .parse()
            .expect("a postgres:// URL");
        server
    }
}

impl Drop for SecondServer {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh")
}

/// A TCP proxy on loopback: its first connection goes to `first`, every later one to `later`.
struct Proxy {
    addr: SocketAddr,
    /// One switch per connection, in the order they came: set, the connection goes silent.
    silent: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
}

impl Proxy {
    async fn start(first: SocketAddr, later: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent = Arc::new(Mutex::new(Vec::new()));
        let switches = Arc::clone(&silent);
        tokio::spawn(async move {
            // Bounded: a test opens a handful of connections.
            for n in 0..64 {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let to = if n == 0 { first } else { later };
                // One switch per connection accepted, so that `silence(n)` names the n-th.
                let switch = Arc::new(AtomicBool::new(false));
                switches.lock().unwrap().push(Arc::clone(&switch));
                let Ok(server) = TcpStream::connect(to).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, Arc::clone(&switch)));
                tokio::spawn(pump(server_read, client_write, switch));
            }
        });
        Proxy { addr, silent }
    }

    /// Stops forwarding on connection `n` (0 the first), both ways, keeping it open.
    fn silence(&self, n: usize) {
        self.silent.lock().unwrap()[n].store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` until either ends, or holds what it reads once `silent` is set.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    silent: Arc<AtomicBool>,
) {
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if silent.load(Ordering::SeqCst) {
            // Silent: nothing more goes through, and nothing is closed.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A connection of its own to the test server, to watch its queries.
async fn observer() -> tokio_postgres::Client {
    let (client, connection) = test_server()
        .connect(NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(connection);
    client
}

/// Waits (bounded: 10 s, in 1 ms steps) until a query with `tag` in its text runs on the test
/// server.
async fn running(observer: &tokio_postgres::Client, tag: &str) {
    for _ in 0..10_000 {
        let row = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE state = 'active' AND pid <> pg_backend_pid() AND position($1 in query) > 0",
                &[&tag],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            return;
        }
        tokio::time::sleep(ms(1)).await;
    }
    panic!("query {tag} never ran");
}

/// The session's connection goes silent while its query runs: the cancel, over a new
/// connection, is sent, but the settle's `ROLLBACK` never answers. After the cancel limit
/// (5 s) the session gives the connection up and says so, rather than leaving every later
/// query waiting for a settle that never comes; the connection itself stays held by the
/// settle (a pool never has it back busy). The later query's scope, 20 s, only bounds the
/// test if the session never gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_connection_goes_silent_after_its_cancel_is_lost_not_stuck() {
    let server = test_server();
    let proxy = Proxy::start(address(&server), address(&server)).await;
    let config = through(&server, proxy.addr);
    let db = Database::new(&config, NoTls).unwrap();
    // The connection as a pool hands one out: dropping it gives it back. Here that is seen.
    let (client, connection) = config
        .connect(NoTls)
        .await
        .expect("connect through the proxy");
    tokio::spawn(connection);
    let given_back = Arc::new(AtomicBool::new(false));
    let pooled = Pooled {
        client,
        given_back: Arc::clone(&given_back),
    };
    let mut session = db.session_with(pooled, |pooled| &pooled.client);
    let observer = observer().await;
    // The caller leaves once the query runs and its connection has gone silent, long before
    // its statement timeout (10 s).
    tokio::select! {
        done = scope_timeout(
            ms(10_000),
            session.query(&POLICY, "SELECT pg_sleep(5) /* session goes silent */", &[]),
        ) => panic!("the query ended: {done:?}"),
        () = async {
            running(&observer, "session goes silent").await;
            proxy.silence(0);
        } => {}
    }
    let next = scope_timeout(ms(20_000), session.query(&POLICY, "SELECT 1", &[]))
        .await
        .expect("the settle gives up within the cancel limit, before this scope ends");
    assert!(matches!(next, Err(PgError::Lost)), "{next:?}");
    let cancels = db.cancels();
    assert_eq!(
        (cancels.sent(), cancels.failed(), cancels.closed()),
        (1, 0, 0),
        "the cancel was sent; the connection, silent, is held until it settles or closes"
    );
    assert!(
        !given_back.load(Ordering::SeqCst),
        "a connection that has not settled went back to its pool"
    );
}

/// A pooled connection: dropping it gives it back to its pool, which the flag records.
struct Pooled {
    client: tokio_postgres::Client,
    given_back: Arc<AtomicBool>,
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.given_back.store(true, Ordering::SeqCst);
    }
}

/// The sqlx cancels' counts are the process's: the tests that read them take turns.
static SQLX_COUNTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// sqlx options for `config`'s user and database, through `to`.
fn sqlx_options(config: &Config, to: SocketAddr) -> sqlx::postgres::PgConnectOptions {
    sqlx::postgres::PgConnectOptions::new()
        .host("127.0.0.1")
        .port(to.port())
        .username(config.get_user().unwrap_or("postgres"))
        .database(config.get_dbname().unwrap_or("postgres"))
}

/// Waits until the pool's one connection is back (the settle runs in a task, and gives it
/// back, or a close lets the pool open a new one, once it is done; bounded by a 20 s scope),
/// then the sqlx cancels sent, failed and closed since `before`.
async fn settled_since(
    pool: &sqlx::PgPool,
    before: deadline_tokio::database::Cancels,
) -> (u64, u64, u64) {
    let back = scope_timeout(ms(20_000), pool.acquire())
        .await
        .expect("the settle ends within the cancel limit, before this scope ends");
    drop(back);
    let after = deadline_tokio::sqlx::cancels();
    (
        after.sent() - before.sent(),
        after.failed() - before.failed(),
        after.closed() - before.closed(),
    )
}

/// The sqlx path of the first test: the pool's one connection goes silent while its query
/// runs; the cancel, over a new connection, is sent, and the settle gives up after the cancel
/// limit (5 s) and closes the connection, rather than holding the pool's one connection for
/// good. The scope around the next acquire, 20 s, only bounds the test if it never gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlx_connection_that_goes_silent_after_its_cancel_is_closed_not_held() {
    use deadline_tokio::sqlx as db;

    let _alone = SQLX_COUNTS.lock().await;
    let server = test_server();
    let proxy = Proxy::start(address(&server), address(&server)).await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(sqlx_options(&server, proxy.addr))
        .await
        .expect("connect through the proxy");
    let observer = observer().await;
    let before = db::cancels();
    // The caller leaves once the query runs (its BEGIN answered: sqlx then knows the backend
    // to cancel) and its connection has gone silent, long before its statement timeout.
    tokio::select! {
        done = scope_timeout(
            ms(10_000),
            db::fetch_all(&pool, &POLICY, sqlx::query("SELECT pg_sleep(5) /* sqlx goes silent */")),
        ) => panic!("the query ended: {done:?}"),
        () = async {
            running(&observer, "sqlx goes silent").await;
            proxy.silence(0);
        } => {}
    }
    assert_eq!(
        settled_since(&pool, before).await,
        (1, 0, 1),
        "the cancel was sent, and the connection that went silent is closed"
    );
}

/// A pool whose address leads to two servers: the query runs on the first, and the cancel,
/// on a new connection, reaches the second, where no backend has that process id (or, worse,
/// another one has). `pg_cancel_backend` there signals nothing the query is part of: the
/// cancel counts as failed, and the connection is closed rather than handed back with its
/// query running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlx_cancel_that_reaches_another_server_is_a_failed_cancel() {
    use deadline_tokio::sqlx as db;

    let _alone = SQLX_COUNTS.lock().await;
    let first = test_server();
    let second = SecondServer::start();
    let proxy = Proxy::start(address(&first), address(&second.config)).await;
    // One connection: the cancel cannot borrow an idle one, and opens a new one.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(sqlx_options(&first, proxy.addr))
        .await
        .expect("connect through the proxy");
    // The route is real: the second server lets the same user in (so a cancel sent there
    // can only fail by finding no such backend), and it is another server.
    let mut direct =
        sqlx::postgres::PgConnection::connect_with(&sqlx_options(&first, address(&second.config)))
            .await
            .expect("the second server lets the test's user in");
    let start = "SELECT pg_postmaster_start_time()::text";
    let second_start: String = sqlx::query_scalar(start)
        .fetch_one(&mut direct)
        .await
        .unwrap();
    let observer = observer().await;
    let first_start: String = observer.query_one(start, &[]).await.unwrap().get(0);
    assert_ne!(first_start, second_start, "two servers");
    let before = db::cancels();
    // The caller leaves once the query runs on the first server (its BEGIN answered: sqlx
    // then knows the backend to cancel), long before its statement timeout (10 s).
    tokio::select! {
        done = scope_timeout(
            ms(10_000),
            db::fetch_all(&pool, &POLICY, sqlx::query("SELECT pg_sleep(5) /* another server */")),
        ) => panic!("the query ended: {done:?}"),
        () = running(&observer, "another server") => {}
    }
    assert_eq!(
        settled_since(&pool, before).await,
        (0, 1, 1),
        "a cancel that reached the other server is not a cancel sent"
    );
}
