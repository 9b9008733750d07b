//! Shared code of the runnable examples.
//!
//! - [`chain`]: the checkout example's A -> B -> C chain as a request handler, generic over the runtime's
//!   [`Timer`](deadline_core::Timer): the application code of the `chain` program, which runs
//!   unchanged on tokio, async-std, smol and embassy.
//! - [`checkout`]: the same chain on the one-line call site (`Dependency::run`), one
//!   application module compiled against every runtime.
//! - [`sim`]: simulated dependencies that answer after a given latency on the runtime's timer.
#![forbid(unsafe_code)]

pub mod chain;
pub mod checkout;
pub mod sim;
