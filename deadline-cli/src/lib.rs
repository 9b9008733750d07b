//! The `deadline` command's library: budget tables, the timeout lab and a
//! deadline-propagation simulator.
//!
//! Every number the command prints comes from `deadline-core`'s own decisions: call timeouts
//! from [`deadline_core::plan::Plan`], worst cases, kill fractions and Little's law from
//! [`deadline_core::analysis`], attempts, retries and hedges from the core's
//! [`Driver`](deadline_core::drive::Driver) on a virtual timer, the retry budget from
//! [`RetryBudget`](deadline_core::budget::RetryBudget), the time left across a hop from [`deadline_core::wire`] and
//! database statement timeouts from [`statement_timeout`](deadline_core::statement::statement_timeout). This crate reads files,
//! arranges the answers into tables, JSON and pictures, and runs the simulator's clock.
//!
//! - [`table`]: the dependency table (TOML) `deadline plan` reads; [`sample`]: latency files.
//! - [`plan`] and [`replay`]: proposals, the budget table of one screen, trace replays.
//! - [`lab`] and [`svg`]: the timeout lab and its picture.
//! - [`live`]: snapshots a running service exported, for `plan --live` and `lab --live`.
//! - [`sim`]: the client → API → service → database simulator.
//! - [`cli`]: the arguments and the dispatch the binary runs; [`output`]: shared formatting.
//! - [`error`]: bad input, named by file, line and field. No input file is read past
//!   256 MiB: a path to something endless (`/dev/zero`) is refused, not read until the
//!   memory runs out.
//!
//! ```
//! use std::time::Duration;
//! use deadline_cli::{lab, plan, sim, table};
//!
//! // The checkout example: B is slow and the response goes out at 160 ms; then C is skipped,
//! // at 176 ms.
//! let report = plan::run(&table::checkout()?, None)?;
//! let respond: Vec<_> = report.traces.iter().map(|t| t.respond_ms).collect();
//! assert_eq!(respond, [Duration::from_millis(160), Duration::from_millis(176)]);
//!
//! // The lab's preset sample: T = 90 ms with one retry costs 180 ms of 250 and kills 1%.
//! let lab = lab::preset(&lab::LabOptions::default())?;
//! let row = lab.rows.iter().find(|r| r.timeout_ms == lab.p99_ms && r.retries == 1).unwrap();
//! assert_eq!((row.worst_case_ms, row.fits, row.kill_fraction), (Duration::from_millis(180), true, 0.01));
//!
//! // The propagation model, every query stalling: the propagated deadline costs 900 ms of
//! // database time.
//! let options = sim::SimOptions { requests: 100, stall_rate: 1.0, ..Default::default() };
//! let propagated = sim::run_strategy(sim::Strategy::Propagated, &options);
//! assert!((propagated.db_ms_per_request - 900.0).abs() < 1.0);
//! # Ok::<(), deadline_cli::error::InputError>(())
//! ```

pub mod cli;
pub mod error;
pub mod lab;
pub mod live;
pub mod output;
pub mod plan;
mod read;
pub mod replay;
pub mod sample;
pub mod sim;
pub mod svg;
pub mod table;
