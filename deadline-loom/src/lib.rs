//! Loom model checks of `deadline-core`'s shared state, in `tests/loom.rs`: the retry budget
//! (never over-drawn; deposits and grants conserved; the floor per second), the circuit
//! breaker (a half-open round admits at most its probes; no transition lost), the histogram
//! and the counters (no update lost, a halving included). One more test checks that the
//! atomics are loom's at all: loom refuses one used outside a model.
//!
//! Built with `--cfg loom`, `deadline-core`'s atomics are loom's, and loom runs each model
//! under every interleaving of its threads (within `LOOM_MAX_PREEMPTIONS`):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p deadline-loom --release
//! ```
//!
//! This crate has no code of its own: it exists so that the build under `--cfg loom` holds
//! nothing but `deadline-core` and loom.
#![no_std]
