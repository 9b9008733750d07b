//! The database's own account of its work: PostgreSQL's statement log, read back after a run.
//!
//! The server (`bash scripts/postgres.sh start-logged`) logs every statement when it starts
//! (`log_statement = all`) and its duration when it ends (`log_min_duration_statement = 0`),
//! each line prefixed with the time as a Unix epoch in milliseconds and the backend's process
//! id (`log_line_prefix = '%n [%p] '`):
//!
//! ```text
//! 1764662689.611 [16120] LOG:  execute s1: SELECT pg_sleep(0.052) /* chain run=0 s=one-try r=17 */
//! 1764662689.663 [16120] LOG:  duration: 51.751 ms
//! 1764662689.662 [16121] LOG:  execute s2: SELECT pg_sleep(1.9) /* chain run=0 s=propagated r=18 */
//! 1764662689.957 [16121] ERROR:  canceling statement due to statement timeout
//! ```
//!
//! A backend runs one statement at a time, so a tagged statement's end is the next
//! `duration:` line of its process (it finished: the server's own measure of its time) or the
//! next `ERROR` or `FATAL` line (the server ended it: a statement timeout, a cancel, a lost
//! connection; its time is the difference of the two lines' instants). pg_stat_statements
//! would not do: it counts only the statements that finish, and a cancelled query is exactly
//! the work this benchmark is about.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use crate::workload::{TAG, parse_tag};

/// One of the benchmark's queries, as the server ran it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LoggedQuery {
    /// The run (stall share) it belongs to.
    pub(crate) run: u32,
    /// The strategy that sent it.
    pub(crate) strategy: String,
    /// The client's request it was for.
    pub(crate) request: u64,
    /// When the server started it, in microseconds since the Unix epoch (to the millisecond).
    pub(crate) start_us: u64,
    /// How long the server worked on it, in microseconds.
    pub(crate) time_us: u64,
    /// How it ended.
    pub(crate) end: End,
}

/// How a query ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// It finished.
    Finished,
    /// The server ended it at its statement timeout.
    StatementTimeout,
    /// The server ended it on a cancel request.
    Cancelled,
    /// The server ended it for another reason (its connection lost, an error).
    Other,
}

/// What a stretch of the log holds.
#[derive(Debug, Default)]
pub(crate) struct Log {
    /// The benchmark's queries, in the order they ended.
    pub(crate) queries: Vec<LoggedQuery>,
    /// Tagged statements that started and whose end is not in the log.
    pub(crate) unfinished: usize,
}

/// The log at `path` from byte `offset` on.
///
/// # Errors
///
/// The file's, if it cannot be read.
pub(crate) fn read_from(path: &str, offset: u64) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The length of the log at `path`: where the next run's lines begin.
///
/// # Errors
///
/// The file's, if it cannot be read.
pub(crate) fn length(path: &str) -> std::io::Result<u64> {
    Ok(std::fs::metadata(path)?.len())
}

/// The benchmark's queries in `text`, a stretch of the statement log.
pub(crate) fn parse(text: &str) -> Log {
    let mut open: HashMap<&str, LoggedQuery> = HashMap::new();
    let mut log = Log::default();
    for line in text.lines() {
        let Some(line) = Line::parse(line) else {
            continue; // a continuation line, or another format
        };
        let starts = line.level == "LOG"
            && (line.message.starts_with("statement: ") || line.message.starts_with("execute "))
            && line.message.contains(TAG);
        if starts {
            if let Some((run, strategy, request)) = parse_tag(line.message) {
                let query = LoggedQuery {
                    run,
                    strategy: strategy.to_owned(),
                    request,
                    start_us: line.at_us,
                    time_us: 0,
                    end: End::Finished,
                };
                if open.insert(line.pid, query).is_some() {
                    log.unfinished += 1;
                }
            }
            continue;
        }
        if line.level == "LOG" {
            if let Some(ms) = line
                .message
                .strip_prefix("duration: ")
                .and_then(|rest| rest.split_once(" ms"))
                .and_then(|(ms, _)| ms.parse::<f64>().ok())
            {
                if let Some(mut query) = open.remove(line.pid) {
                    query.time_us = (ms * 1_000.0).round() as u64;
                    log.queries.push(query);
                }
            }
        } else if line.level == "ERROR" || line.level == "FATAL" {
            if let Some(mut query) = open.remove(line.pid) {
                query.time_us = line.at_us.saturating_sub(query.start_us);
                query.end = if line.message.contains("due to statement timeout") {
                    End::StatementTimeout
                } else if line.message.contains("due to user request") {
                    End::Cancelled
                } else {
                    End::Other
                };
                log.queries.push(query);
            }
        }
    }
    log.unfinished += open.len();
    log
}

/// One line of the log: `EPOCH.MS [PID] LEVEL:  MESSAGE`.
struct Line<'a> {
    at_us: u64,
    pid: &'a str,
    level: &'a str,
    message: &'a str,
}

impl<'a> Line<'a> {
    fn parse(line: &'a str) -> Option<Self> {
        let (at, rest) = line.split_once(' ')?;
        let (secs, millis) = at.split_once('.')?;
        if millis.len() != 3 {
            return None;
        }
        let at_us = secs
            .parse::<u64>()
            .ok()?
            .checked_mul(1_000_000)?
            .checked_add(millis.parse::<u64>().ok()? * 1_000)?;
        let (pid, rest) = rest.strip_prefix('[')?.split_once("] ")?;
        let (level, message) = rest.split_once(":  ")?;
        Some(Line {
            at_us,
            pid,
            level,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_query_takes_its_logged_duration_and_an_ended_one_its_error_instant() {
        let text = "\
1764662689.600 [7] LOG:  statement: BEGIN
1764662689.600 [7] LOG:  duration: 0.050 ms
1764662689.601 [7] LOG:  duration: 0.120 ms  parse <unnamed>: SELECT pg_sleep(1.9) /* chain run=1 s=propagated r=18 */
1764662689.611 [9] LOG:  execute <unnamed>: SELECT pg_sleep(0.052) /* chain run=1 s=one-try r=17 */
1764662689.612 [7] LOG:  execute <unnamed>: SELECT pg_sleep(1.9) /* chain run=1 s=propagated r=18 */
1764662689.663 [9] LOG:  duration: 51.751 ms
1764662689.907 [7] ERROR:  canceling statement due to statement timeout
1764662689.907 [7] STATEMENT:  SELECT pg_sleep(1.9) /* chain run=1 s=propagated r=18 */
1764662689.908 [7] LOG:  statement: ROLLBACK
1764662689.908 [7] LOG:  duration: 0.030 ms
1764662690.000 [8] LOG:  execute <unnamed>: SELECT pg_sleep(2.1) /* chain run=1 s=one-try r=19 */
1764662690.100 [10] LOG:  execute s3: SELECT pg_sleep(1.7) /* chain run=1 s=propagated r=20 */
1764662690.180 [10] ERROR:  canceling statement due to user request
";
        let log = parse(text);
        assert_eq!(
            log.queries,
            [
                LoggedQuery {
                    run: 1,
                    strategy: "one-try".into(),
                    request: 17,
                    start_us: 1_764_662_689_611_000,
                    time_us: 51_751,
                    end: End::Finished,
                },
                LoggedQuery {
                    run: 1,
                    strategy: "propagated".into(),
                    request: 18,
                    start_us: 1_764_662_689_612_000,
                    time_us: 295_000,
                    end: End::StatementTimeout,
                },
                LoggedQuery {
                    run: 1,
                    strategy: "propagated".into(),
                    request: 20,
                    start_us: 1_764_662_690_100_000,
                    time_us: 80_000,
                    end: End::Cancelled,
                },
            ]
        );
        assert_eq!(log.unfinished, 1, "request 19's query has not ended");
    }

    #[test]
    fn lines_of_other_formats_are_skipped() {
        let log = parse(
            "2026-12-02 08:04:49.611 UTC [16120] LOG:  statement: SELECT 1 /* chain run=1 s=one-try r=1 */\n\
             \tcontinued\n",
        );
        assert!(log.queries.is_empty());
        assert_eq!(log.unfinished, 0);
    }
}
