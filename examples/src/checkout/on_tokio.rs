//! The application module on tokio.

/// tokio.
pub type Rt = deadline_tokio::Tokio;

#[path = "app.rs"]
#[allow(
    clippy::duplicate_mod,
    reason = "the one application module, compiled against each runtime on purpose"
)]
pub mod app;
