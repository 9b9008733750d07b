//! The lab's picture, written by hand: the latency distribution on a log scale, a dashed line
//! at each candidate timeout with what it abandons, the killed share shaded (darker where more
//! candidates abandon it) and the allocation.

use std::fmt::Write as _;
use std::time::Duration;

use crate::lab::LabReport;
use crate::output::{fmt_ms, fmt_num, fmt_percent, ms_f64};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 96.0;
const RIGHT: f64 = 924.0;
/// The height of the bar chart.
const PLOT_HEIGHT: f64 = 300.0;
/// The first row of candidate labels.
const LABELS_TOP: f64 = 86.0;
/// The height of a row of labels or of the worst-case strip.
const ROW: f64 = 19.0;
const FONT: &str = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
const BAR: &str = "#3b6ea8";
const KILL: &str = "#d7301f";
const INK: &str = "#1f2933";
const MUTED: &str = "#616e7c";
const GRID: &str = "#e4e7eb";
/// Colours of the candidate lines, in order.
const PALETTE: [&str; 8] = [
    "#e66101", "#5e3c99", "#1b9e77", "#c51b7d", "#386cb0", "#b35806", "#4d9221", "#525252",
];
/// Above this many distinct latencies, bars are log-scaled bins instead of one per value.
const MAX_DISTINCT_BARS: usize = 40;
/// The number of bins when binning.
const BINS: usize = 48;

/// One bar: a latency range and the share of calls in it.
struct Bar {
    lo: f64,
    hi: f64,
    count: usize,
}

/// One candidate as drawn: label, timeout and kill fraction, in ms and shares.
struct Mark {
    label: String,
    t: f64,
    kill: f64,
    color: &'static str,
    /// The worst cases `(r + 1) × T` of its rows, with whether each fits.
    worst: Vec<(u32, f64, bool)>,
}

/// The lab's distribution as a standalone SVG document.
#[must_use]
pub fn lab(report: &LabReport, latencies: &[Duration]) -> String {
    let mut values: Vec<f64> = latencies.iter().map(|&d| ms_f64(d)).collect();
    values.sort_by(f64::total_cmp);
    let n = values.len().max(1);
    let min_positive = values.iter().copied().find(|&v| v > 0.0).unwrap_or(1.0);
    let marks: Vec<Mark> = report
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| Mark {
            label: c.label.clone(),
            t: ms_f64(c.timeout_ms),
            kill: c.killed as f64 / n as f64,
            color: PALETTE[i % PALETTE.len()],
            worst: report
                .rows
                .iter()
                .filter(|r| r.timeout_ms == c.timeout_ms)
                .map(|r| (r.retries, ms_f64(r.worst_case_ms), r.fits))
                .collect(),
        })
        .collect();
    let alloc = ms_f64(report.alloc_ms);
    let lo_data = marks
        .iter()
        .map(|m| m.t)
        .filter(|&t| t > 0.0)
        .fold(min_positive, f64::min);
    let hi_data = marks
        .iter()
        .flat_map(|m| m.worst.iter().map(|w| w.1))
        .chain([alloc, values.last().copied().unwrap_or(1.0)])
        .fold(min_positive, f64::max);
    let lo = nice_floor(lo_data / 1.5);
    let hi = nice_ceil(hi_data * 1.3).max(lo * 10.0);
    let x = |v: f64| {
        let v = v.max(lo);
        LEFT + (RIGHT - LEFT) * (v.log10() - lo.log10()) / (hi.log10() - lo.log10())
    };

    // Candidate labels go in rows above the plot, so that none overlap; a label that would
    // run past the right edge is written to the left of its line.
    let mut order: Vec<usize> = (0..marks.len()).collect();
    order.sort_by(|&a, &b| marks[a].t.total_cmp(&marks[b].t));
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut label_row = vec![0usize; marks.len()];
    let mut label_left = vec![false; marks.len()];
    for &i in &order {
        let m = &marks[i];
        let xc = x(m.t);
        let width = label_text(m).chars().count() as f64 * 6.9 + 10.0;
        let left = xc + width > WIDTH - 6.0;
        let span = if left {
            (xc - width, xc)
        } else {
            (xc, xc + width)
        };
        let row = rows
            .iter()
            .position(|r| r.iter().all(|&(a, z)| span.1 < a || span.0 > z))
            .unwrap_or(rows.len());
        match rows.get_mut(row) {
            Some(r) => r.push(span),
            None => rows.push(vec![span]),
        }
        label_row[i] = row;
        label_left[i] = left;
    }
    let top = LABELS_TOP + ROW * rows.len() as f64 + 8.0;
    let bottom = top + PLOT_HEIGHT;
    let strip_top = bottom + 76.0;
    let strip_rows = marks.len() as f64;
    let legend_y = strip_top + 8.0 + ROW * strip_rows + 26.0;
    let height = legend_y + 24.0;

    let bars = bars(&values, lo, hi);
    let distinct = bars.iter().all(|b| b.lo == b.hi);
    let max_share = bars.iter().map(|b| b.count).max().unwrap_or(1) as f64 / n as f64;
    let y_top = nice_share(max_share);
    let y = |share: f64| bottom - (bottom - top) * (share / y_top);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="{FONT}" role="img" aria-labelledby="title desc">"#
    );
    let _ = writeln!(
        s,
        r#"<title id="title">Latency distribution with candidate timeouts</title><desc id="desc">{} measured calls; median {} ms, p95 {} ms, p99 {} ms, mean {} ms; allocation {} ms.</desc>"#,
        report.calls,
        fmt_ms(report.p50_ms),
        fmt_ms(report.p95_ms),
        fmt_ms(report.p99_ms),
        fmt_ms(report.mean_ms),
        fmt_ms(report.alloc_ms)
    );
    let _ = writeln!(
        s,
        r##"<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="34" font-size="20" font-weight="600" fill="{INK}">Where each timeout cuts: {} measured calls, {} ms allocation</text>"#,
        report.calls,
        fmt_ms(report.alloc_ms)
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="56" font-size="13" fill="{MUTED}">A timeout abandons every call slower than it, though each would have succeeded. The mean falls between the bulk and the tail.</text>"#
    );

    // Horizontal grid and the y axis.
    let step = y_top / 5.0;
    for i in 0..=5 {
        let share = step * f64::from(i);
        let yy = y(share);
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{yy:.1}" x2="{RIGHT}" y2="{yy:.1}" stroke="{GRID}"/><text x="{:.1}" y="{:.1}" font-size="12" fill="{MUTED}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            yy + 4.0,
            fmt_percent(share)
        );
    }
    let _ = writeln!(
        s,
        r#"<text transform="translate(40 {:.1}) rotate(-90)" font-size="13" fill="{INK}" text-anchor="middle">share of calls</text>"#,
        (top + bottom) / 2.0
    );

    // The killed share: one translucent band per candidate, from its timeout rightwards.
    for m in &marks {
        let x0 = x(m.t);
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{top:.1}" width="{:.1}" height="{PLOT_HEIGHT}" fill="{KILL}" fill-opacity="0.06"/>"#,
            (RIGHT - x0).max(0.0)
        );
    }

    // Candidate lines (behind the bars); their labels come last, over everything.
    for (i, m) in marks.iter().enumerate() {
        let xc = x(m.t);
        let ly = LABELS_TOP + ROW * label_row[i] as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{xc:.1}" y1="{:.1}" x2="{xc:.1}" y2="{bottom:.1}" stroke="{}" stroke-width="2" stroke-dasharray="6 4"/><circle cx="{xc:.1}" cy="{:.1}" r="3.5" fill="{}"/>"#,
            ly - 4.0,
            m.color,
            ly - 4.0,
            m.color,
        );
    }

    // Bars: blue if every candidate keeps them, red (darker for more candidates) if some
    // candidate abandons them.
    let bar_width = ((RIGHT - LEFT) / (bars.len().max(1) as f64 * 2.5)).clamp(6.0, 26.0);
    for b in &bars {
        let share = b.count as f64 / n as f64;
        let (x0, w) = if distinct {
            (x(b.lo) - bar_width / 2.0, bar_width)
        } else {
            let (a, z) = (x(b.lo), x(b.hi));
            (a + 0.5, (z - a - 1.0).max(1.0))
        };
        let yb = y(share);
        let killed_by = marks.iter().filter(|m| b.lo > m.t).count();
        let (fill, opacity) = if killed_by > 0 {
            (
                KILL,
                0.45 + 0.55 * killed_by as f64 / marks.len().max(1) as f64,
            )
        } else {
            (BAR, 1.0)
        };
        let range = if distinct {
            fmt_num(b.lo, 2)
        } else {
            format!("{}–{}", fmt_num(b.lo, 2), fmt_num(b.hi, 2))
        };
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{yb:.1}" width="{w:.1}" height="{:.1}" fill="{fill}" fill-opacity="{opacity:.2}" rx="2"><title>{} calls at {range} ms ({}); abandoned by {killed_by} of {} candidates</title></rect>"#,
            (bottom - yb).max(0.0),
            b.count,
            fmt_percent(share),
            marks.len()
        );
        if distinct {
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="11.5" font-weight="600" fill="{INK}" text-anchor="middle" stroke="#ffffff" stroke-width="3" paint-order="stroke">{}</text>"##,
                x0 + w / 2.0,
                yb - 6.0,
                b.count
            );
        }
    }

    // The allocation, through the plot and the worst-case strip.
    let xa = x(alloc);
    let strip_bottom = strip_top + 8.0 + ROW * strip_rows;
    let _ = writeln!(
        s,
        r##"<line x1="{xa:.1}" y1="{top:.1}" x2="{xa:.1}" y2="{bottom:.1}" stroke="{INK}" stroke-width="1.6" stroke-dasharray="1 4" stroke-linecap="round"/><line x1="{xa:.1}" y1="{:.1}" x2="{xa:.1}" y2="{strip_bottom:.1}" stroke="{INK}" stroke-width="1.6" stroke-dasharray="1 4" stroke-linecap="round"/><text x="{:.1}" y="{:.1}" font-size="12" fill="{INK}" stroke="#ffffff" stroke-width="3" paint-order="stroke">allocation {} ms</text>"##,
        strip_top - 4.0,
        xa + 6.0,
        top + 16.0,
        fmt_ms(report.alloc_ms)
    );

    // The x axis: log scale, ticks at 1, 2 and 5 times powers of ten.
    let _ = writeln!(
        s,
        r#"<line x1="{LEFT}" y1="{bottom:.1}" x2="{RIGHT}" y2="{bottom:.1}" stroke="{INK}"/>"#
    );
    for tick in ticks(lo, hi) {
        let xt = x(tick);
        let _ = writeln!(
            s,
            r#"<line x1="{xt:.1}" y1="{bottom:.1}" x2="{xt:.1}" y2="{:.1}" stroke="{INK}"/><text x="{xt:.1}" y="{:.1}" font-size="12" fill="{MUTED}" text-anchor="middle">{}</text>"#,
            bottom + 5.0,
            bottom + 19.0,
            fmt_num(tick, 3)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" font-size="13" fill="{INK}" text-anchor="middle">latency (ms, log scale)</text>"#,
        (LEFT + RIGHT) / 2.0,
        bottom + 40.0
    );

    // The worst-case strip: (r + 1) × T for each retry count, filled when it fits.
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{:.1}" font-size="13" font-weight="600" fill="{INK}">Worst case with 0, 1, 2… retries: (retries + 1) × timeout must fit the allocation</text>"#,
        strip_top - 10.0
    );
    for (row, m) in marks.iter().enumerate() {
        let yy = strip_top + 8.0 + ROW * row as f64 + ROW / 2.0;
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{yy:.1}" x2="{RIGHT}" y2="{yy:.1}" stroke="{GRID}"/><text x="{:.1}" y="{:.1}" font-size="12" fill="{}" font-weight="600" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            yy + 4.0,
            m.color,
            escape(&strip_label(m))
        );
        let mut previous = x(m.t);
        for &(retries, worst, fits) in &m.worst {
            let xw = x(worst);
            if retries > 0 {
                let _ = writeln!(
                    s,
                    r#"<line x1="{previous:.1}" y1="{yy:.1}" x2="{xw:.1}" y2="{yy:.1}" stroke="{}" stroke-width="2" stroke-opacity="0.5"/>"#,
                    m.color
                );
            }
            previous = xw;
            let tip = format!(
                "{} with {retries} retr{}: worst case {} ms, {}",
                m.label,
                if retries == 1 { "y" } else { "ies" },
                fmt_num(worst, 2),
                if fits { "fits" } else { "does not fit" }
            );
            if fits {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{xw:.1}" cy="{yy:.1}" r="5" fill="{}"><title>{}</title></circle>"#,
                    m.color,
                    escape(&tip)
                );
            } else {
                let _ = writeln!(
                    s,
                    r##"<circle cx="{xw:.1}" cy="{yy:.1}" r="5" fill="#ffffff" stroke="{KILL}" stroke-width="2"><title>{}</title></circle><path d="M{:.1} {:.1}l6 6m0 -6l-6 6" stroke="{KILL}" stroke-width="1.6"/>"##,
                    escape(&tip),
                    xw - 3.0,
                    yy - 3.0
                );
            }
        }
    }

    // Candidate labels, haloed so the lines they cross stay readable.
    for (i, m) in marks.iter().enumerate() {
        let ly = LABELS_TOP + ROW * label_row[i] as f64;
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{ly:.1}" font-size="12.5" fill="{}" font-weight="600" text-anchor="{}" stroke="#ffffff" stroke-width="4" paint-order="stroke">{}</text>"##,
            if label_left[i] {
                x(m.t) - 7.0
            } else {
                x(m.t) + 7.0
            },
            m.color,
            if label_left[i] { "end" } else { "start" },
            escape(&label_text(m))
        );
    }

    // Legend.
    let mut lx = LEFT;
    let entries: [(&str, String); 4] = [
        ("bar", "kept by every candidate timeout".to_owned()),
        ("kill", "abandoned by some (darker: by more)".to_owned()),
        ("fits", "worst case fits".to_owned()),
        ("nofit", "does not fit".to_owned()),
    ];
    for (kind, text) in entries {
        let sy = legend_y - 11.0;
        match kind {
            "bar" => {
                let _ = write!(
                    s,
                    r#"<rect x="{lx:.1}" y="{sy:.1}" width="14" height="14" fill="{BAR}" fill-opacity="0.92" rx="2"/>"#
                );
            }
            "kill" => {
                let _ = write!(
                    s,
                    r#"<rect x="{lx:.1}" y="{sy:.1}" width="14" height="14" fill="{KILL}" fill-opacity="0.8" rx="2"/>"#
                );
            }
            "fits" => {
                let _ = write!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="5" fill="{MUTED}"/>"#,
                    lx + 7.0,
                    sy + 7.0
                );
            }
            _ => {
                let _ = write!(
                    s,
                    r##"<circle cx="{:.1}" cy="{:.1}" r="5" fill="#ffffff" stroke="{KILL}" stroke-width="2"/>"##,
                    lx + 7.0,
                    sy + 7.0
                );
            }
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{legend_y:.1}" font-size="12.5" fill="{INK}">{text}</text>"#,
            lx + 20.0
        );
        lx += 20.0 + text.chars().count() as f64 * 6.9 + 26.0;
    }
    s.push_str("</svg>\n");
    s
}

/// A candidate's name in the worst-case strip: its label, or its timeout when it was given.
fn strip_label(m: &Mark) -> String {
    if m.label == "given" {
        format!("{} ms", fmt_num(m.t, 1))
    } else {
        m.label.clone()
    }
}

/// A candidate's label above the plot: `p99 90 ms · kills 1%`.
fn label_text(m: &Mark) -> String {
    format!(
        "{} {} ms · kills {}",
        m.label,
        fmt_num(m.t, 2),
        fmt_percent(m.kill)
    )
}

/// The bars: one per distinct latency when there are few, else log-scaled bins over
/// `[lo, hi]`.
fn bars(values: &[f64], lo: f64, hi: f64) -> Vec<Bar> {
    let mut distinct: Vec<Bar> = Vec::new();
    for &v in values {
        match distinct.last_mut() {
            Some(b) if b.lo == v => b.count += 1,
            _ => distinct.push(Bar {
                lo: v,
                hi: v,
                count: 1,
            }),
        }
    }
    if distinct.len() <= MAX_DISTINCT_BARS {
        return distinct;
    }
    let (llo, lhi) = (lo.log10(), hi.log10());
    let mut bins: Vec<Bar> = (0..BINS)
        .map(|i| {
            let a = llo + (lhi - llo) * i as f64 / BINS as f64;
            let z = llo + (lhi - llo) * (i + 1) as f64 / BINS as f64;
            Bar {
                lo: 10f64.powf(a),
                hi: 10f64.powf(z),
                count: 0,
            }
        })
        .collect();
    for &v in values {
        let pos = ((v.max(lo).log10() - llo) / (lhi - llo) * BINS as f64).floor();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let i = (pos.max(0.0) as usize).min(BINS - 1);
        bins[i].count += 1;
    }
    bins.retain(|b| b.count > 0);
    bins
}

/// The largest of 1, 2 or 5 times a power of ten at or below `v`.
fn nice_floor(v: f64) -> f64 {
    let v = v.max(1e-3);
    let p = 10f64.powf(v.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&c| c <= v)
        .unwrap_or(p)
}

/// The smallest of 1, 2 or 5 times a power of ten at or above `v`.
fn nice_ceil(v: f64) -> f64 {
    let v = v.max(1e-3);
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * p)
}

/// A round top for the share axis: 10%, 20%, 25%, 50%, 75% or 100%, just above `max`.
fn nice_share(max: f64) -> f64 {
    [0.05, 0.1, 0.2, 0.25, 0.5, 0.75, 1.0]
        .into_iter()
        .find(|&t| t >= max * 1.08)
        .unwrap_or(1.0)
}

/// Ticks at 1, 2 and 5 times powers of ten within `[lo, hi]`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut p = 10f64.powf(lo.log10().floor());
    while p <= hi * 1.0001 {
        for m in [1.0, 2.0, 5.0] {
            let t = m * p;
            if t >= lo * 0.9999 && t <= hi * 1.0001 {
                out.push(t);
            }
        }
        p *= 10.0;
    }
    out
}

/// Escapes text for XML.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_bounds_and_ticks() {
        assert_eq!(nice_floor(5.3), 5.0);
        assert_eq!(nice_floor(1.9), 1.0);
        assert_eq!(nice_ceil(600.0), 1000.0);
        assert_eq!(nice_ceil(180.0), 200.0);
        assert_eq!(
            ticks(5.0, 1000.0),
            vec![5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
        );
    }

    #[test]
    fn many_distinct_values_are_binned() {
        let values: Vec<f64> = (1..=500).map(f64::from).collect();
        let b = bars(&values, 1.0, 1000.0);
        assert!(b.len() <= BINS);
        assert_eq!(b.iter().map(|b| b.count).sum::<usize>(), 500);
    }
}
