//! A browser's cross-origin call (gRPC-Web, connect-web) to a server behind `DeadlineLayer`:
//! the answers the layer makes itself (a handler dropped at the deadline, a request refused
//! on arrival) carry the CORS headers only when the CORS layer is outside the deadline layer,
//! and a browser drops a cross-origin answer without them. Paused time: every figure is exact.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use deadline_core::ms;
use deadline_core::wire::Propagation;
use deadline_tokio::DeadlineLayer;
use deadline_tokio::layer::AxumService;
use http::Request;
use tower::{Layer, ServiceExt};
use tower_http::cors::CorsLayer;

/// A handler slower than any deadline these requests carry.
fn app() -> Router {
    Router::new().route(
        "/pricing.Pricing/Price",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "too late"
        }),
    )
}

fn layer() -> DeadlineLayer {
    DeadlineLayer::new(Propagation::DEFAULT.with_max(ms(10_000)), ms(1_000))
}

/// A gRPC-Web call from a page on another origin, with 50 ms left.
fn browser_call() -> Request<Body> {
    Request::post("/pricing.Pricing/Price")
        .header("origin", "https://app.example")
        .header("content-type", "application/grpc-web+proto")
        .header("grpc-timeout", "50m")
        .body(Body::empty())
        .unwrap()
}

/// The supported way: the CORS layer on an outer router, around the deadline layer and the
/// whole app. The deadline's answer carries `access-control-allow-origin`, and exposes
/// `grpc-status` to the page.
#[tokio::test(start_paused = true)]
async fn with_cors_outside_the_deadlines_answer_reaches_the_page() {
    let served = Router::new()
        .fallback_service(layer().layer(app()))
        .layer(CorsLayer::permissive());
    let response = served.oneshot(browser_call()).await.unwrap();
    assert_eq!(response.headers()["grpc-status"], "4");
    assert_eq!(response.headers()["access-control-allow-origin"], "*");
    assert_eq!(response.headers()["access-control-expose-headers"], "*");
}

/// What the docs warn against: a CORS layer inside the deadline layer (on the router it
/// wraps) never sees the layer's own answer, which a browser then drops.
#[tokio::test(start_paused = true)]
async fn with_cors_inside_the_deadlines_answer_has_no_cors_headers() {
    let served = AxumService::from(layer().layer(app().layer(CorsLayer::permissive())));
    let response = served.oneshot(browser_call()).await.unwrap();
    assert_eq!(response.headers()["grpc-status"], "4");
    assert!(
        response
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}
