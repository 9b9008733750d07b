//! The figures of one stall share: each strategy's on the real chain, beside the model's
//! (`deadline sim` for the same requests, stall share and seed), and the ordering `--check`
//! asks for.

use std::fmt::Write as _;

use deadline_cli::output::{fmt_num, fmt_percent, pad};
use deadline_cli::sim::{SimReport, Strategy};

use crate::accounting::{End, LoggedQuery};

/// What the client saw of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// Whether it got a 200 within its 1 s.
    pub(crate) answered: bool,
    /// When it stopped waiting (its answer came, or it gave up), in microseconds since the
    /// Unix epoch: the clock the server's log uses.
    pub(crate) stop_us: u64,
}

/// The four figures the model reports, for one strategy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Figures {
    /// The share of requests answered in time.
    pub(crate) answered: f64,
    /// Database queries per request.
    pub(crate) queries_per_request: f64,
    /// Database time per request, in milliseconds.
    pub(crate) db_ms_per_request: f64,
    /// The share of database time spent after the client stopped waiting.
    pub(crate) db_after_client_gone: f64,
}

/// One strategy's run on the real chain.
#[derive(Debug)]
pub(crate) struct StrategyRun {
    /// The strategy.
    pub(crate) strategy: Strategy,
    /// What the client saw, by request number.
    pub(crate) records: Vec<Record>,
    /// Queries the order service sent.
    pub(crate) sent: u64,
    /// Retries its budget refused.
    pub(crate) throttled: u64,
    /// Database connections it opened.
    pub(crate) connections: u64,
    /// Cancels the library sent to the server (the propagated deadline only).
    pub(crate) cancels: u64,
    /// Requests whose first query stalls.
    pub(crate) stalled_first: usize,
}

/// One strategy's figures, real and modelled, and how the server ran its queries.
#[derive(Debug)]
pub(crate) struct Row {
    /// The strategy.
    pub(crate) strategy: Strategy,
    /// On the real chain.
    pub(crate) chain: Figures,
    /// In the model.
    pub(crate) model: Figures,
    /// Queries the order service sent.
    pub(crate) sent: u64,
    /// Queries in the server's log.
    pub(crate) logged: u64,
    /// Of those, the ones the server ended at their statement timeout.
    pub(crate) ended_by_timeout: u64,
    /// Of those, the ones the server ended on a cancel.
    pub(crate) ended_by_cancel: u64,
    /// Logged queries naming a request the client never sent.
    pub(crate) strays: u64,
    /// Retries the budget refused.
    pub(crate) throttled: u64,
    /// Database connections opened.
    pub(crate) connections: u64,
    /// Cancels sent by the library.
    pub(crate) cancels: u64,
    /// Requests whose first query stalls.
    pub(crate) stalled_first: usize,
    /// The longest any query ran on after its client stopped waiting, in milliseconds.
    pub(crate) latest_after_ms: f64,
}

/// The figures of `run`, from the client's records and the server's log.
pub(crate) fn row(run: &StrategyRun, logged: &[&LoggedQuery], model: Figures) -> Row {
    let n = run.records.len().max(1) as f64;
    let answered = run.records.iter().filter(|r| r.answered).count() as f64;
    let (mut db_us, mut after_us, mut latest_after_us, mut strays) = (0u64, 0u64, 0u64, 0u64);
    for q in logged {
        let Some(record) = usize::try_from(q.request)
            .ok()
            .and_then(|i| run.records.get(i))
        else {
            strays += 1;
            continue;
        };
        let end = q.start_us + q.time_us;
        db_us += q.time_us;
        after_us += end.saturating_sub(q.start_us.max(record.stop_us));
        latest_after_us = latest_after_us.max(end.saturating_sub(record.stop_us));
    }
    Row {
        strategy: run.strategy,
        chain: Figures {
            answered: answered / n,
            queries_per_request: logged.len() as f64 / n,
            db_ms_per_request: db_us as f64 / 1_000.0 / n,
            db_after_client_gone: if db_us == 0 {
                0.0
            } else {
                after_us as f64 / db_us as f64
            },
        },
        model,
        sent: run.sent,
        logged: logged.len() as u64,
        ended_by_timeout: logged
            .iter()
            .filter(|q| q.end == End::StatementTimeout)
            .count() as u64,
        ended_by_cancel: logged.iter().filter(|q| q.end == End::Cancelled).count() as u64,
        strays,
        throttled: run.throttled,
        connections: run.connections,
        cancels: run.cancels,
        stalled_first: run.stalled_first,
        latest_after_ms: latest_after_us as f64 / 1_000.0,
    }
}

/// The model's figures for `strategy` in `sim`.
pub(crate) fn model_figures(sim: &SimReport, strategy: Strategy) -> Figures {
    let s = sim
        .strategies
        .iter()
        .find(|s| s.name == strategy.name())
        .expect("the simulator reports every strategy");
    Figures {
        answered: s.answered,
        queries_per_request: s.queries_per_request,
        db_ms_per_request: s.db_ms_per_request,
        db_after_client_gone: s.db_after_client_gone,
    }
}

/// Whether a real figure differs from the model's by more than 10% of the model's, and by
/// more than `floor` (so that 0.2% against 0% is not a difference).
fn differs(chain: f64, model: f64, floor: f64) -> bool {
    let gap = (chain - model).abs();
    gap > 0.1 * model.abs() && gap > floor
}

/// The figures of the rows that differ from the model's by more than 10%.
pub(crate) fn differences(rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rows {
        let (c, m) = (r.chain, r.model);
        let name = r.strategy.name();
        if differs(c.answered, m.answered, 0.01) {
            out.push(format!(
                "{name}: answered {} against {}",
                fmt_percent(c.answered),
                fmt_percent(m.answered)
            ));
        }
        if differs(c.queries_per_request, m.queries_per_request, 0.01) {
            out.push(format!(
                "{name}: queries/request {} against {}",
                fmt_num(c.queries_per_request, 3),
                fmt_num(m.queries_per_request, 3)
            ));
        }
        if differs(c.db_ms_per_request, m.db_ms_per_request, 1.0) {
            out.push(format!(
                "{name}: DB time/request {} ms against {} ms",
                fmt_num(c.db_ms_per_request, 1),
                fmt_num(m.db_ms_per_request, 1)
            ));
        }
        if differs(c.db_after_client_gone, m.db_after_client_gone, 0.01) {
            out.push(format!(
                "{name}: DB time, client gone {} against {}",
                fmt_percent(c.db_after_client_gone),
                fmt_percent(m.db_after_client_gone)
            ));
        }
    }
    out
}

/// The rows as two tables: the figures beside the model's, then how the server ran the
/// queries.
pub(crate) fn render(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}  {:>17}  {:>17}  {:>21}  {:>17}",
        pad("", 18),
        "answered in time",
        "queries/request",
        "DB time/request",
        "DB time, client gone"
    );
    let _ = writeln!(
        out,
        "{}  {:>8} {:>8}  {:>8} {:>8}  {:>10} {:>10}  {:>8} {:>8}",
        pad("strategy", 18),
        "chain",
        "model",
        "chain",
        "model",
        "chain",
        "model",
        "chain",
        "model"
    );
    for r in rows {
        let (c, m) = (r.chain, r.model);
        let _ = writeln!(
            out,
            "{}  {:>8} {:>8}  {:>8} {:>8}  {:>7} ms {:>7} ms  {:>8} {:>8}",
            pad(r.strategy.name(), 18),
            fmt_percent(c.answered),
            fmt_percent(m.answered),
            fmt_num(c.queries_per_request, 3),
            fmt_num(m.queries_per_request, 3),
            fmt_num(c.db_ms_per_request, 1),
            fmt_num(m.db_ms_per_request, 1),
            fmt_percent(c.db_after_client_gone),
            fmt_percent(m.db_after_client_gone),
        );
    }
    let _ = writeln!(
        out,
        "\n{}  {:>13}  {:>6}  {:>6}  {:>21}  {:>19}  {:>9}  {:>11}  {:>7}",
        pad("strategy", 18),
        "first stalled",
        "sent",
        "logged",
        "ended: timeout/cancel",
        "latest, client gone",
        "throttled",
        "connections",
        "cancels"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{}  {:>13}  {:>6}  {:>6}  {:>21}  {:>16} ms  {:>9}  {:>11}  {:>7}",
            pad(r.strategy.name(), 18),
            r.stalled_first,
            r.sent,
            r.logged,
            format!("{} / {}", r.ended_by_timeout, r.ended_by_cancel),
            fmt_num(r.latest_after_ms, 1),
            r.throttled,
            r.connections,
            r.cancels
        );
    }
    out
}

/// The ordering the model predicts, on the real chain: the reasons it does not hold (none when
/// it does). Only orderings, never absolute times: `stall_rate` says which ones the run can
/// show (with no stall, the strategies do not differ).
pub(crate) fn check(rows: &[Row], stall_rate: f64) -> Vec<String> {
    let mut failed = Vec::new();
    let get = |s: Strategy| rows.iter().find(|r| r.strategy == s);
    for r in rows {
        // The figures are the server's: every query the order service sent is in its log,
        // with its end (the propagated deadline's session may not send a query it was about
        // to, when the try's time runs out first).
        let complete = match r.strategy {
            Strategy::Propagated => r.logged <= r.sent,
            _ => r.logged == r.sent,
        };
        if !complete || r.strays > 0 {
            failed.push(format!(
                "{}: the order service sent {} queries, the server's log has {} ({} for requests never sent)",
                r.strategy.name(),
                r.sent,
                r.logged,
                r.strays
            ));
        }
    }
    let (Some(one), Some(every), Some(layer), Some(prop)) = (
        get(Strategy::OneTry),
        get(Strategy::RetryEveryLayer),
        get(Strategy::RetryOneLayer),
        get(Strategy::Propagated),
    ) else {
        failed.push("a strategy did not run".to_owned());
        return failed;
    };
    if stall_rate <= 0.0 {
        return failed;
    }
    let others = [one, every, layer];
    for other in others {
        if prop.chain.db_ms_per_request >= other.chain.db_ms_per_request {
            failed.push(format!(
                "propagated: {:.1} ms of database time per request, not less than {}'s {:.1} ms",
                prop.chain.db_ms_per_request,
                other.strategy.name(),
                other.chain.db_ms_per_request
            ));
        }
        if prop.chain.db_after_client_gone >= other.chain.db_after_client_gone {
            failed.push(format!(
                "propagated: {} of database time after the client left, not less than {}'s {}",
                fmt_percent(prop.chain.db_after_client_gone),
                other.strategy.name(),
                fmt_percent(other.chain.db_after_client_gone)
            ));
        }
    }
    if prop.chain.queries_per_request > 3.0 {
        failed.push(format!(
            "propagated: {} queries per request, more than its 3 tries",
            fmt_num(prop.chain.queries_per_request, 3)
        ));
    }
    // The retries cost queries. (Which of the two retrying strategies makes more is certain
    // only when every query stalls: otherwise each meets its own draw of stalls.)
    let retries_ordered = if stall_rate >= 1.0 {
        every.chain.queries_per_request >= layer.chain.queries_per_request
    } else {
        every.chain.queries_per_request > one.chain.queries_per_request
    };
    if !retries_ordered || layer.chain.queries_per_request <= one.chain.queries_per_request {
        failed.push(format!(
            "queries per request not ordered as the retries make them: retry-every-layer {}, \
             retry-one-layer {}, one-try {}",
            fmt_num(every.chain.queries_per_request, 3),
            fmt_num(layer.chain.queries_per_request, 3),
            fmt_num(one.chain.queries_per_request, 3)
        ));
    }
    if stall_rate < 1.0 {
        // Some requests stall and the others do not: retries answer what one try cannot, and
        // the propagated deadline answers as many as the retries (within 1 point).
        for retrying in [every, layer, prop] {
            if retrying.chain.answered <= one.chain.answered {
                failed.push(format!(
                    "{} answered {}, not more than one-try's {}",
                    retrying.strategy.name(),
                    fmt_percent(retrying.chain.answered),
                    fmt_percent(one.chain.answered)
                ));
            }
        }
        let fewest = every.chain.answered.min(layer.chain.answered);
        if prop.chain.answered < fewest - 0.01 {
            failed.push(format!(
                "propagated answered {}, fewer than the retry strategies' {}",
                fmt_percent(prop.chain.answered),
                fmt_percent(fewest)
            ));
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(strategy: Strategy, answered: &[bool]) -> StrategyRun {
        StrategyRun {
            strategy,
            records: answered
                .iter()
                .map(|&answered| Record {
                    answered,
                    stop_us: 1_000_000,
                })
                .collect(),
            sent: 2,
            throttled: 0,
            connections: 1,
            cancels: 0,
            stalled_first: 0,
        }
    }

    fn query(request: u64, start_us: u64, time_us: u64) -> LoggedQuery {
        LoggedQuery {
            run: 0,
            strategy: "one-try".into(),
            request,
            start_us,
            time_us,
            end: End::Finished,
        }
    }

    #[test]
    fn database_time_after_the_client_left_counts_from_its_stop() {
        // Request 0 stops at 1 s: its query ran 0.5 s to 2.5 s, 1.5 s of it after.
        // Request 1 also stops at 1 s: its query ran 0.2 s to 0.25 s, none after.
        let one = run(Strategy::OneTry, &[false, true]);
        let (a, b) = (query(0, 500_000, 2_000_000), query(1, 200_000, 50_000));
        let zero = Figures {
            answered: 0.0,
            queries_per_request: 0.0,
            db_ms_per_request: 0.0,
            db_after_client_gone: 0.0,
        };
        let r = row(&one, &[&a, &b], zero);
        assert_eq!(r.chain.answered, 0.5);
        assert_eq!(r.chain.queries_per_request, 1.0);
        assert_eq!(r.chain.db_ms_per_request, 1_025.0);
        assert!((r.chain.db_after_client_gone - 1.5 / 2.05).abs() < 1e-9);
        assert_eq!(r.latest_after_ms, 1_500.0);
        assert_eq!(r.strays, 0);
        let stray = query(7, 0, 1);
        assert_eq!(row(&one, &[&stray], zero).strays, 1);
    }

    /// Rows whose real figures are the model's, as `deadline sim` gives them.
    fn model_rows(stall_rate: f64) -> Vec<Row> {
        let sim = deadline_cli::sim::run(&deadline_cli::sim::SimOptions {
            requests: 300,
            stall_rate,
            ..Default::default()
        });
        Strategy::ALL
            .iter()
            .map(|&strategy| {
                let figures = model_figures(&sim, strategy);
                let mut r = row(&run(strategy, &[]), &[], figures);
                r.chain = figures;
                r.sent = 0;
                r
            })
            .collect()
    }

    #[test]
    fn the_check_passes_on_the_models_figures_and_fails_out_of_order() {
        for stall_rate in [0.0, 0.05, 1.0] {
            assert_eq!(
                check(&model_rows(stall_rate), stall_rate),
                Vec::<String>::new()
            );
        }
        // The propagated deadline spending as much database time as one try.
        let mut rows = model_rows(0.05);
        rows[3].chain.db_ms_per_request = rows[0].chain.db_ms_per_request;
        assert_eq!(check(&rows, 0.05).len(), 1, "{:?}", check(&rows, 0.05));
        // One try answering as much as the retries.
        let mut rows = model_rows(0.05);
        rows[0].chain.answered = 1.0;
        assert_eq!(check(&rows, 0.05).len(), 3);
        // Retries at every layer making fewer queries than at one layer, all stalling.
        let mut rows = model_rows(1.0);
        rows[1].chain.queries_per_request = 2.0;
        assert_eq!(check(&rows, 1.0).len(), 1);
        // A query the server's log lacks.
        let mut rows = model_rows(0.0);
        rows[2].sent = 1;
        assert_eq!(check(&rows, 0.0).len(), 1);
    }

    #[test]
    fn ten_percent_with_a_floor() {
        assert!(!differs(0.946, 0.951, 0.01));
        assert!(differs(4.0, 9.0, 0.01));
        assert!(!differs(0.004, 0.0, 0.01));
        assert!(differs(70.0, 155.0, 1.0));
    }
}
