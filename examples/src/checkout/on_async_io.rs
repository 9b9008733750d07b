//! The application module on async-std and smol (timers on async-io).

/// async-std or smol.
pub type Rt = deadline_std::AsyncIo;

#[path = "app.rs"]
#[allow(
    clippy::duplicate_mod,
    reason = "the one application module, compiled against each runtime on purpose"
)]
pub mod app;
