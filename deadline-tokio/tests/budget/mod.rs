//! Test support shared by the tests of work found pending at its deadline with the task's
//! cooperative budget spent: spending it, and polling once in a poll that spent it first.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Spends what is left of the task's cooperative budget, in the poll of `cx`'s task: as
/// hyper's connection task may, reading and writing its socket before it polls a request's
/// future or body.
pub(crate) fn spend_budget(cx: &mut Context<'_>) {
    while tokio::task::coop::has_budget_remaining() {
        if let Poll::Ready(restore) = tokio::task::coop::poll_proceed(cx) {
            restore.made_progress();
        }
    }
}

/// Polls `fut` once, in a fresh poll of this task whose cooperative budget is spent first.
pub(crate) async fn poll_starved<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    tokio::task::yield_now().await;
    std::future::poll_fn(|cx| {
        spend_budget(cx);
        Poll::Ready(Pin::new(&mut *fut).poll(cx))
    })
    .await
}
