//! The command line: arguments (clap) and the dispatch [`main`] runs.

use std::io::Write as _;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::InputError;
use crate::{lab, live, plan, sample, sim, svg, table};

/// Turn measured latencies into timeouts a team can defend, and see what deadlines save.
#[derive(Debug, Parser)]
#[command(
    name = "deadline",
    version,
    about = "Turn measured latencies into timeouts a team can defend, and see what deadlines save.",
    long_about = None
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Propose caps, floors and hedge delays from a dependency table, print the budget table
    /// of one screen and replay its traces.
    Plan(PlanArgs),
    /// Candidate timeouts and retry counts against a latency sample and an allocation.
    Lab(LabArgs),
    /// Simulate client -> API -> service -> database under four timeout strategies.
    Sim(SimArgs),
}

/// `deadline plan`.
#[derive(Debug, Args)]
#[command(
    after_help = "Without FILE, uses the worked example: a 200 ms budget, A then B then \
    C (optional), 20 ms of own work, and its two traces (response at 160 ms; C skipped, \
    response at 176 ms). The table format is described in the crate's README."
)]
pub struct PlanArgs {
    /// The dependency table (TOML). Default: the built-in worked example.
    pub file: Option<String>,
    /// Requests per second for Little's law (overrides the table's `rate_per_sec`).
    #[arg(long, value_name = "PER_SEC", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Snapshots a running service took of its dependencies (`Dependency::snapshot` as JSON):
    /// print their live figures beside the table's, the changes they call for, and the
    /// budget table with the changes made (repeat for several files).
    #[arg(long, value_name = "SNAPSHOT.json")]
    pub live: Vec<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `deadline lab`.
#[derive(Debug, Args)]
#[command(
    after_help = "A sample file holds latencies in milliseconds, separated by spaces, \
    commas or new lines; `8 x 45` stands for 45 calls at 8 ms; `#` starts a comment. Without \
    SAMPLE, uses the lab's preset: 45 calls at 8 ms, 25 at 11, 15 at 16, 8 at 24, 4 at 45, \
    2 at 90, 1 at 400."
)]
pub struct LabArgs {
    /// The latency sample. Default: the built-in preset of a hundred calls.
    pub sample: Option<String>,
    /// The time the budget gives this call, in ms.
    #[arg(long, value_name = "MS", default_value = "250", value_parser = parse_ms_arg)]
    pub alloc: Duration,
    /// A timeout to try besides the median, p95, p99 and mean, in ms (repeat, or separate
    /// with commas).
    #[arg(long = "timeout", value_name = "MS", value_delimiter = ',', value_parser = parse_timeout_arg)]
    pub timeouts: Vec<Duration>,
    /// The largest retry count to show: rows for 0..=N retries.
    #[arg(long, value_name = "N", default_value_t = lab::DEFAULT_MAX_RETRIES,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub retries: u32,
    /// Also draw the distribution, the candidate timeouts and the killed share to this SVG
    /// file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<String>,
    /// Read the sample from a dependency's live snapshot (`Dependency::snapshot` as JSON)
    /// instead: its histogram, each latency at its bucket's upper bound; its cap in use is a
    /// candidate.
    #[arg(long, value_name = "SNAPSHOT.json", conflicts_with = "sample")]
    pub live: Option<String>,
    /// The dependency to read from `--live` (needed when the file holds several).
    #[arg(long, value_name = "NAME", requires = "live")]
    pub dependency: Option<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `deadline sim`.
#[derive(Debug, Args)]
#[command(
    after_help = "The model (1 s client timeout, 1 ms per hop, 40-60 ms queries, \
    stalled queries 1.5-2.5 s, 300 ms per database attempt) and why it gives the figures \
    it does are described in the deadline-cli README."
)]
pub struct SimArgs {
    /// The share of database queries that stall, from 0 to 1.
    #[arg(long, value_name = "RATE", default_value_t = sim::DEFAULT_STALL_RATE,
          value_parser = parse_fraction)]
    pub stall_rate: f64,
    /// The seed of the random stream: the same seed gives the same figures.
    #[arg(long, default_value_t = sim::DEFAULT_SEED)]
    pub seed: u64,
    /// Requests per strategy.
    #[arg(long, default_value_t = sim::DEFAULT_REQUESTS,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub requests: u64,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn parse_ms_arg(s: &str) -> Result<Duration, String> {
    sample::parse_ms(s)
}

fn parse_timeout_arg(s: &str) -> Result<Duration, String> {
    match sample::parse_ms(s)? {
        t if t.is_zero() => Err(format!("`{s}`: a timeout must be more than 0 ms")),
        t => Ok(t),
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a rate of requests per second (a number >= 0)"
        )),
    }
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a share between 0 and 1")),
    }
}

/// A failure of a subcommand: bad input (exit 2) or an output that could not be written
/// (exit 1).
#[derive(Debug)]
pub enum Failure {
    /// Bad input.
    Input(InputError),
    /// Writing an output file or stdout failed.
    Output(String),
}

impl From<InputError> for Failure {
    fn from(e: InputError) -> Self {
        Failure::Input(e)
    }
}

/// Runs a parsed command and returns what to print on stdout.
///
/// # Errors
///
/// Bad input, or an SVG file that cannot be written.
pub fn execute(command: &Command) -> Result<String, Failure> {
    match command {
        Command::Plan(args) => {
            let table = match &args.file {
                Some(path) => table::read(path)?,
                None => table::checkout()?,
            };
            if !args.live.is_empty() {
                let snapshots = live::read(&args.live)?;
                let report = live::run(&table, &snapshots, args.rate)?;
                return Ok(if args.json {
                    to_json(&report)
                } else {
                    live::render(&report)
                });
            }
            let report = plan::run(&table, args.rate)?;
            Ok(if args.json {
                to_json(&report)
            } else {
                plan::render(&report)
            })
        }
        Command::Lab(args) => {
            let mut options = lab::LabOptions {
                alloc: args.alloc,
                timeouts: args.timeouts.clone(),
                max_retries: args.retries,
            };
            let mut note = None;
            let (report, latencies) = match (&args.live, &args.sample) {
                (Some(path), _) => {
                    let (name, snapshot) = live_snapshot(path, args.dependency.as_deref())?;
                    if snapshot.cap() != Duration::MAX {
                        options.timeouts.push(snapshot.cap());
                    }
                    let latencies = snapshot.latencies();
                    let sample = format!("{path}: {name}");
                    note = Some(format!(
                        "\nfrom a live snapshot: each of its {} latencies at its bucket's upper \
                         bound (within the histogram's error);\n{} of them timed out, recorded at their \
                         timeout: their latency was at least that.\n",
                        latencies.len(),
                        snapshot.latency.timed_out
                    ));
                    (lab::run(&sample, &latencies, &options)?, latencies)
                }
                (None, Some(path)) => {
                    let latencies = sample::read(path)?;
                    (lab::run(path, &latencies, &options)?, latencies)
                }
                (None, None) => {
                    let latencies = sample::parse(lab::PRESET_NAME, lab::PRESET)?;
                    (lab::run(lab::PRESET_NAME, &latencies, &options)?, latencies)
                }
            };
            if let Some(path) = &args.svg {
                let picture = svg::lab(&report, &latencies);
                std::fs::write(path, picture)
                    .map_err(|e| Failure::Output(format!("cannot write {path}: {e}")))?;
            }
            Ok(if args.json {
                to_json(&report)
            } else {
                let mut text = lab::render(&report);
                text.push_str(note.as_deref().unwrap_or_default());
                text
            })
        }
        Command::Sim(args) => {
            let options = sim::SimOptions {
                requests: args.requests,
                stall_rate: args.stall_rate,
                seed: args.seed,
                ..sim::SimOptions::default()
            };
            let report = sim::run(&options);
            Ok(if args.json {
                to_json(&report)
            } else {
                sim::render(&report)
            })
        }
    }
}

/// The snapshot of `dependency` in the file at `path` (or its only one), and its name.
fn live_snapshot(
    path: &str,
    dependency: Option<&str>,
) -> Result<(String, live::Snapshot), InputError> {
    let mut snapshots = live::read(&[path.to_owned()])?.by_name;
    let name = match dependency {
        Some(name) => name.to_owned(),
        None if snapshots.len() == 1 => snapshots.keys().next().cloned().unwrap_or_default(),
        None if snapshots.is_empty() => {
            return Err(InputError::new(
                path,
                None,
                None,
                "the file holds no snapshot",
            ));
        }
        None => {
            let names: Vec<&str> = snapshots.keys().map(String::as_str).collect();
            return Err(InputError::new(
                path,
                None,
                Some("dependency"),
                format!(
                    "the file holds {} snapshots: name one with --dependency ({})",
                    names.len(),
                    names.join(", ")
                ),
            ));
        }
    };
    match snapshots.remove(&name) {
        Some(s) if s.latency.recorded > 0 => Ok((name, s)),
        Some(_) => Err(InputError::new(
            path,
            None,
            Some("latency"),
            format!("`{name}` recorded no latency yet"),
        )),
        None => Err(InputError::new(
            path,
            None,
            Some("dependency"),
            format!("no snapshot of `{name}`"),
        )),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    let mut s =
        serde_json::to_string_pretty(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// Parses the process's arguments, runs the command, prints, and returns the exit code:
/// 0, 2 for bad arguments or bad input, 1 when an output cannot be written.
#[must_use]
pub fn main() -> i32 {
    let cli = Cli::parse();
    match execute(&cli.command) {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => 0,
                // A closed pipe (`deadline sim | head`) is not an error worth a message.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
                Err(e) => {
                    eprintln!("deadline: cannot write the output: {e}");
                    1
                }
            }
        }
        Err(Failure::Input(e)) => {
            eprintln!("deadline: error: {e}");
            InputError::EXIT_CODE
        }
        Err(Failure::Output(message)) => {
            eprintln!("deadline: error: {message}");
            1
        }
    }
}
