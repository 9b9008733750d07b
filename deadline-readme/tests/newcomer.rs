//! Three programs a newcomer writes from the README alone, each checked for what it must do:
//!
//! 1. a retried flaky call inside a 500 ms scope: the retries fire, and the scope bounds what
//!    runs in it (a one-second sleep is cut at 500 ms);
//! 2. an axum service that calls an always-slow downstream over reqwest: every request is
//!    answered 504 (the deadline's), never 502, and the dependency's `timeouts` counter is
//!    the number of attempts that timed out; the same with a downstream on the library that
//!    answers its own 504 early, as one does whose database ends its query at the statement
//!    timeout, a margin before its handler's deadline;
//! 3. a blocking program with a `Dependency` on plain threads and `std::net` sockets: a
//!    failed attempt is retried, and a peer that never answers ends as the library's timeout.
//!
//! The first runs on tokio's virtual time; the second and third on real sockets over
//! loopback, in real time, and assert what happened, never how long it took.

use std::io::{Read, Write};
use std::net::TcpListener as StdListener;
use std::sync::atomic::{AtomicU32, Ordering};

use deadline_core::{CallError, Error, Policy, ms};

mod flaky {
    use super::*;
    use deadline_tokio::{Dependency, scope_timeout};

    // As the README writes it: a required dependency, idempotent, two retries.
    static FLAKY: Dependency = Dependency::new(
        Policy::required("flaky")
            .idempotent()
            .with_cap(ms(100))
            .with_floor(ms(10))
            .with_retries(2),
    );

    static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

    /// Fails every third attempt (the first of each three), then answers.
    async fn flaky() -> Result<u32, std::io::Error> {
        let n = ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(ms(5)).await;
        if n % 3 == 0 {
            Err(std::io::Error::other("connection reset"))
        } else {
            Ok(n)
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_retried_call_in_a_scope_retries_and_the_scope_bounds() {
        let mut answered = 0;
        for _ in 0..20 {
            let answer = scope_timeout(ms(500), FLAKY.run(|_| flaky())).await;
            assert!(answer.expect("inside its scope").is_ok());
            answered += 1;
        }
        let attempts = ATTEMPTS.load(Ordering::Relaxed);
        let counts = FLAKY.counters().snapshot();
        // Every call answered; each failure was retried (none refused by the 10% budget,
        // whose floor grants 10 retries a second).
        assert_eq!(answered, 20);
        assert_eq!(counts.calls, 20);
        assert_eq!(counts.successes, 20);
        assert_eq!(u64::from(attempts), 20 + counts.retries);
        assert_eq!(counts.retries, u64::from(attempts.div_ceil(3)));
        assert!(counts.retries > 0);
        assert_eq!(counts.budget_refusals, 0);

        // The scope bounds: a one-second sleep inside 500 ms is cut at 500 ms.
        let start = tokio::time::Instant::now();
        let slow = scope_timeout(ms(500), tokio::time::sleep(ms(1_000))).await;
        assert_eq!(slow, Err(Error::DeadlineExceeded));
        assert_eq!(start.elapsed(), ms(500)); // virtual time: exact
    }
}

mod always_slow {
    use super::*;
    use axum::http::StatusCode;
    use axum::{Router, extract::State, routing::get};
    use deadline_core::wire::Propagation;
    use deadline_tokio::reqwest::{DeadlineRequest, classify, error_for_status};
    use deadline_tokio::{DeadlineLayer, Dependency};
    use tower::Layer;

    static PRICING: Dependency = Dependency::new(
        Policy::required("pricing")
            .idempotent()
            .with_cap(ms(100))
            .with_floor(ms(20))
            .with_retries(2),
    );

    /// Attempts the service made (each one calls the downstream once).
    static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

    #[derive(Clone)]
    struct App {
        http: reqwest::Client,
        downstream: String,
    }

    // The README's handler, calling a downstream that never answers in time.
    async fn price(State(app): State<App>) -> Result<String, StatusCode> {
        let price = PRICING.run(|_| async {
            ATTEMPTS.fetch_add(1, Ordering::Relaxed);
            let reply = app.http.get(&app.downstream).time_left()?.send().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                error_for_status(reply)?.text().await?,
            )
        });
        Ok(price.classify(|e| classify(&**e)).reserve(ms(5)).await?)
    }

    /// The service, with one layer around its router, as the README serves it, calling
    /// `downstream`; its address.
    async fn serve(downstream: String) -> String {
        let layer = DeadlineLayer::new(Propagation::DEFAULT.with_max(ms(10_000)), ms(1_000));
        let app = Router::new().route("/price", get(price)).with_state(App {
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a reqwest client"),
            downstream,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let service = format!("http://{}/price", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, layer.layer(app)).await.unwrap() });
        service
    }

    /// The statuses of 200 requests to `service` with 250 ms each, 20 at a time.
    async fn statuses_of(service: &str) -> Vec<StatusCode> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("a reqwest client");
        let mut statuses = Vec::new();
        for _ in 0..10 {
            let batch: Vec<_> = (0..20)
                .map(|_| {
                    let request = client.get(service).header("x-deadline-ms", "250");
                    tokio::spawn(async move { request.send().await.unwrap().status() })
                })
                .collect();
            for request in batch {
                statuses.push(request.await.unwrap());
            }
        }
        statuses
    }

    /// The service, calling `downstream`, answers each of 200 requests 504, and counts each
    /// of its attempts as a timeout (none as a failure), and some were retried.
    async fn every_answer_is_504_and_every_attempt_a_timeout(downstream: String) {
        let before = PRICING.counters().snapshot();
        let attempts_before = u64::from(ATTEMPTS.load(Ordering::Relaxed));
        let service = serve(downstream).await;
        let statuses = statuses_of(&service).await;

        let gateway_timeouts = statuses
            .iter()
            .filter(|s| **s == StatusCode::GATEWAY_TIMEOUT)
            .count();
        assert_eq!(gateway_timeouts, 200, "statuses: {statuses:?}");
        let counts = PRICING.counters().snapshot();
        let attempts = u64::from(ATTEMPTS.load(Ordering::Relaxed)) - attempts_before;
        let retries = counts.retries - before.retries;
        assert_eq!(counts.calls - before.calls, 200);
        assert_eq!(counts.timeouts - before.timeouts, attempts, "{counts:?}");
        assert_eq!(attempts, 200 + retries);
        assert!(retries > 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_request_is_answered_504_and_every_timeout_counted() {
        // The downstream: always slow (ten seconds).
        let slow = Router::new().route(
            "/price",
            get(|| async {
                tokio::time::sleep(ms(10_000)).await;
                "42"
            }),
        );
        let slow_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let downstream = format!("http://{}/price", slow_listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(slow_listener, slow).await.unwrap() });
        every_answer_is_504_and_every_attempt_a_timeout(downstream).await;

        // A downstream on the library that answers its own 504 20 ms before its handler's
        // deadline, as one does whose query the database ends at its statement timeout: its
        // 504 comes before the time it was sent is running out, and is still the deadline's.
        let early = DeadlineLayer::new(Propagation::DEFAULT, ms(1_000)).layer(Router::new().route(
            "/price",
            get(|| async {
                let left = deadline_tokio::remaining().expect("inside the layer's deadline");
                tokio::time::sleep(left.saturating_sub(ms(20))).await;
                StatusCode::GATEWAY_TIMEOUT
            }),
        ));
        let early_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let downstream = format!("http://{}/price", early_listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(early_listener, early).await.unwrap() });
        every_answer_is_504_and_every_attempt_a_timeout(downstream).await;
    }
}

mod blocking {
    use super::*;
    use deadline_core::Dependency;
    use deadline_core::runtime::scope_timeout;
    use deadline_std::Blocking;

    static PRICING: Dependency<Blocking> = Dependency::new(
        Policy::required("pricing")
            .idempotent()
            .with_cap(ms(100))
            .with_floor(ms(10))
            .with_retries(1),
    );

    static SILENT: Dependency<Blocking> = Dependency::new(
        Policy::required("silent")
            .idempotent()
            .with_cap(ms(100))
            .with_floor(ms(10))
            .with_retries(1),
    );

    /// The README's blocking attempt: connect within the attempt's limits, send, read the reply.
    fn ask(
        addr: std::net::SocketAddr,
        limits: deadline_core::call::Limits,
    ) -> std::io::Result<String> {
        let (mut stream, _) = deadline_std::net::connect(&addr, &limits, &deadline_std::StdClock)?;
        stream.write_all(b"GET ")?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply)?;
        if reply.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed without an answer",
            ));
        }
        Ok(reply)
    }

    #[test]
    fn a_failed_attempt_is_retried() {
        // The server closes its first connection without an answer, then answers "42".
        let server = StdListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            for n in 0..2 {
                let (mut s, _) = server.accept().unwrap();
                let mut request = [0; 4];
                s.read_exact(&mut request).unwrap();
                if n == 1 {
                    s.write_all(b"42").unwrap();
                }
            }
        });
        let price = Blocking::block_on(scope_timeout::<Blocking, _>(
            ms(2_000),
            PRICING.run(|limits| async move { ask(addr, limits) }),
        ));
        assert_eq!(price.expect("inside its scope").unwrap(), "42");
        peer.join().unwrap();
        let counts = PRICING.counters().snapshot();
        assert_eq!((counts.calls, counts.retries, counts.successes), (1, 1, 1));
    }

    #[test]
    fn a_peer_that_never_answers_is_the_librarys_timeout() {
        // Accepts, reads, and never answers: each attempt's read ends at its socket limit.
        let server = StdListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in server.incoming().take(2) {
                held.push(stream.unwrap());
            }
            std::thread::sleep(std::time::Duration::from_secs(5));
        });
        let price: Result<Result<String, CallError<std::io::Error>>, Error> =
            Blocking::block_on(scope_timeout::<Blocking, _>(
                ms(2_000),
                SILENT.run(|limits| async move { ask(addr, limits) }),
            ));
        let error = price.expect("inside its scope").unwrap_err();
        assert_eq!(
            error.library(),
            Some(Error::Timeout { after: ms(100) }),
            "{error:?}"
        );
        let counts = SILENT.counters().snapshot();
        assert_eq!((counts.calls, counts.retries, counts.timeouts), (1, 1, 2));
    }
}
