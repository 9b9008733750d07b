//! The application module on embassy's executor.

/// embassy.
pub type Rt = deadline_embassy::Embassy;

#[path = "app.rs"]
#[allow(
    clippy::duplicate_mod,
    reason = "the one application module, compiled against each runtime on purpose"
)]
pub mod app;
