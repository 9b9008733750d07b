//! The server the `server` program measures, six ways: the same axum handler with no layer,
//! with a layer that does nothing (what `Router::layer` itself costs), with `DeadlineLayer`
//! around the whole router (`axum::serve(listener, layer.layer(router))`, as the library's
//! documentation adds it), with `DeadlineLayer` through `Router::layer`, and with tower's
//! `TimeoutLayer` both ways: through `Router::layer` behind `HandleErrorLayer`, as axum's
//! documentation adds it, and around the whole router (behind axum's `HandleError`, the
//! router's routes made once, as `axum::serve` makes a router's). The per-call scenarios run
//! the same services in process.

use std::time::Duration;

use axum::ServiceExt;
use axum::error_handling::{HandleError, HandleErrorLayer};
use axum::http::StatusCode;
use deadline_core::ms;
use deadline_core::wire::Propagation;
use deadline_tokio::DeadlineLayer;
use deadline_tokio::layer::DeadlineService;
use tower::ServiceBuilder;

/// The variants, by name, in the order of [`apps`].
pub const VARIANTS: [&str; 6] = [
    "no layer",
    "an empty layer",
    "DeadlineLayer",
    "DeadlineLayer, Router::layer",
    "tower TimeoutLayer, Router::layer",
    "tower TimeoutLayer",
];

/// Where `DeadlineLayer` around the router, the way the README serves it, is in [`VARIANTS`].
pub const DEADLINE_LAYER: usize = 2;

/// What the handler hashes: its little work.
static PAYLOAD: [u8; 1024] = {
    let mut p = [0u8; 1024];
    let mut i = 0;
    while i < p.len() {
        p[i] = (i * 31 % 251) as u8;
        i += 1;
    }
    p
};

/// The handler: FNV-1a over 1 KiB, answered as hex.
pub async fn handler() -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in core::hint::black_box(&PAYLOAD) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}\n")
}

/// tower's `TimeoutLayer` error, as axum answers it.
async fn timed_out(_: tower::BoxError) -> (StatusCode, &'static str) {
    (StatusCode::REQUEST_TIMEOUT, "timed out\n")
}

fn app() -> axum::Router {
    axum::Router::new().route("/", axum::routing::get(handler))
}

/// The handler with no layer.
pub fn plain() -> axum::Router {
    app()
}

/// The handler behind a layer that does nothing (tower's `Identity`): what adding any layer
/// through `Router::layer` costs (axum boxes each layered route's future).
pub fn empty_layer() -> axum::Router {
    app().layer(tower::layer::util::Identity::new())
}

/// The handler behind `DeadlineLayer`: callers believed up to 10 s, 1 s for those that send
/// no deadline.
pub fn deadline_layer() -> axum::Router {
    app().layer(DeadlineLayer::new(
        Propagation::DEFAULT.with_max(ms(10_000)),
        ms(1_000),
    ))
}

/// The handler's router wrapped whole in `DeadlineLayer`, as `axum::serve` takes it (rather
/// than through `Router::layer`, which boxes every route's service and future once more).
pub fn deadline_layer_around() -> DeadlineService<axum::Router> {
    tower::Layer::layer(
        &DeadlineLayer::new(Propagation::DEFAULT.with_max(ms(10_000)), ms(1_000)),
        app(),
    )
}

/// The handler behind tower's `TimeoutLayer` of 1 s.
pub fn tower_timeout() -> axum::Router {
    app().layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(timed_out))
            .timeout(Duration::from_secs(1)),
    )
}

/// What `axum::serve` serves: a router, a router wrapped whole in `DeadlineLayer`, or one
/// wrapped whole in tower's `TimeoutLayer`.
pub enum App {
    /// A router, with or without layers of its own.
    Router(axum::Router),
    /// A router behind `DeadlineLayer`.
    Wrapped(DeadlineService<axum::Router>),
    /// A router behind tower's `TimeoutLayer` of 1 s, and axum's `HandleError` (which turns
    /// its error into a response, as `axum::serve` needs).
    TowerAround(axum::Router),
}

impl App {
    /// Serves the app on `listener` until the task is dropped.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        match self {
            App::Router(router) => axum::serve(listener, router).await,
            App::Wrapped(service) => axum::serve(listener, service).await,
            App::TowerAround(router) => {
                // The routes made once, as `axum::serve` makes a router's for each
                // connection: called as it is, a router makes each request's route again.
                let timed =
                    tower::timeout::Timeout::new(router.with_state(()), Duration::from_secs(1));
                let service = HandleError::new(timed, timed_out);
                axum::serve(
                    listener,
                    ServiceExt::<axum::extract::Request>::into_make_service(service),
                )
                .await
            }
        }
    }
}

/// The apps, in the order of [`VARIANTS`].
pub fn apps() -> [App; 6] {
    [
        App::Router(plain()),
        App::Router(empty_layer()),
        App::Wrapped(deadline_layer_around()),
        App::Router(deadline_layer()),
        App::Router(tower_timeout()),
        App::TowerAround(app()),
    ]
}
