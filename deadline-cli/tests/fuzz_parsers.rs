//! The fuzz targets' properties for the dependency table and the sample file
//! (`fuzz/props/cli.rs`), run by proptest on stable: on any text, and on text shaped like the
//! files (known keys with good and bad values, `x COUNT` lines, comments, huge counts).

#[path = "../../fuzz/props/cli.rs"]
mod props;

use std::path::Path;

use proptest::prelude::*;

/// The directory the tables' sample files are read from: the command's own data.
fn data_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/data"))
}

/// A number as a table writes it, and the values that must be rejected.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..2_000).prop_map(|n| n.to_string()),
        (0.0f64..500.0).prop_map(|f| format!("{f:.3}")),
        Just("-5".to_owned()),
        Just("0".to_owned()),
        Just("1e300".to_owned()),
        Just("nan".to_owned()),
        Just("inf".to_owned()),
        Just("\"ten\"".to_owned()),
    ]
}

const DEPENDENCY_KEYS: [&str; 14] = [
    "p50_ms",
    "p95_ms",
    "p999_ms",
    "cap_ms",
    "cap_margin_ms",
    "floor_ms",
    "connect_ms",
    "backoff_ms",
    "backoff_max_ms",
    "hedge_delay_ms",
    "retries",
    "required",
    "mode",
    "hedge",
];

/// One `[[dependency]]`: a name (sometimes repeated), `idempotent` (mostly true, which
/// retries and hedges need, sometimes false or absent) and some keys.
fn dependency() -> impl Strategy<Value = String> {
    (
        0u8..4,
        proptest::collection::vec((0..DEPENDENCY_KEYS.len(), number(), any::<bool>()), 0..8),
        any::<bool>(),
        prop_oneof![3 => Just(Some(true)), 1 => Just(Some(false)), 1 => Just(None)],
    )
        .prop_map(|(name, keys, samples, idempotent)| {
            let mut text = format!("[[dependency]]\nname = \"d{name}\"\n");
            if samples {
                text.push_str("samples = \"pricing.txt\"\n");
            }
            if let Some(idempotent) = idempotent {
                text.push_str(&format!("idempotent = {idempotent}\n"));
            }
            for (key, value, flag) in keys {
                let key = DEPENDENCY_KEYS[key];
                let value = match key {
                    "required" | "hedge" => flag.to_string(),
                    "mode" if flag => "\"parallel\"".to_owned(),
                    "mode" => "\"sequential\"".to_owned(),
                    _ => value,
                };
                text.push_str(&format!("{key} = {value}\n"));
            }
            text
        })
}

/// A table: a budget, some top-level keys, dependencies, and maybe a trace.
fn table() -> impl Strategy<Value = String> {
    (
        number(),
        proptest::option::of(number()),
        proptest::option::of(number()),
        proptest::collection::vec(dependency(), 0..5),
        proptest::option::of((0u8..4, number())),
    )
        .prop_map(|(budget, own, rate, deps, trace)| {
            let mut text = format!("budget_ms = {budget}\n");
            if let Some(own) = own {
                text.push_str(&format!("own_work_ms = {own}\n"));
            }
            if let Some(rate) = rate {
                text.push_str(&format!("rate_per_sec = {rate}\n"));
            }
            for d in deps {
                text.push_str(&d);
            }
            if let Some((name, latency)) = trace {
                text.push_str(&format!(
                    "[[trace]]\nlatency_ms = {{ d{name} = {latency} }}\n"
                ));
            }
            text
        })
}

/// Lines of a sample file: latencies, `x COUNT`, `ms` suffixes, commas, comments, garbage.
fn sample() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            "[0-9]{1,4}(\\.[0-9]{1,3})?( ?ms)?",
            "[0-9]{1,3} x [0-9]{1,3}",
            Just("8 x 99999999999".to_owned()),
            Just("1 x 10000001".to_owned()),
            Just("-3".to_owned()),
            Just("1e13".to_owned()),
            Just("# a comment".to_owned()),
            Just("4, 5,6".to_owned()),
            ".{0,8}",
        ],
        0..12,
    )
    .prop_map(|lines| lines.join("\n"))
}

/// `default` cases, or `PROPTEST_CASES` when set (miri runs few).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(512)))]

    #[test]
    fn table_shaped(text in table()) {
        props::check_table(text.as_bytes(), data_dir());
    }

    #[test]
    fn table_any(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        props::check_table(&data, data_dir());
    }

    #[test]
    fn sample_shaped(text in sample()) {
        props::check_sample(text.as_bytes());
    }

    #[test]
    fn sample_any(data in proptest::collection::vec(any::<u8>(), 0..256)) {
        props::check_sample(&data);
    }
}

/// The fuzz target's seed tables are accepted (a stale seed, refused for a key the table
/// format came to need, would start every fuzz run from an error instead of from retries and
/// hedges), and pass.
#[test]
fn the_fuzz_seeds() {
    let seeds = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/seeds/cli_table"
    ));
    let mut seen = 0;
    for entry in std::fs::read_dir(seeds).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let parsed = deadline_cli::table::parse("seed.toml", &text, Some(data_dir()));
        assert!(parsed.is_ok(), "{}: {:?}", path.display(), parsed.err());
        props::check_table(text.as_bytes(), data_dir());
        seen += 1;
    }
    assert!(seen >= 2, "the seeds are read");
}

/// The command's own data files (tables and samples) pass too.
#[test]
fn the_shipped_files() {
    let mut seen = 0;
    for entry in std::fs::read_dir(data_dir()).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read(&path).unwrap();
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => props::check_table(&text, data_dir()),
            Some("txt") => props::check_sample(&text),
            _ => continue,
        }
        seen += 1;
    }
    assert!(seen >= 2, "the data directory holds tables and samples");
}
