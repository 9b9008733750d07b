//! The application module on plain threads: `Blocking::block_on` runs it, and its sleeps
//! block the thread.

/// Plain threads.
pub type Rt = deadline_std::Blocking;

#[path = "app.rs"]
#[allow(
    clippy::duplicate_mod,
    reason = "the one application module, compiled against each runtime on purpose"
)]
pub mod app;
