//! Properties of the `deadline` command's file parsers (the dependency table, TOML; the
//! latency sample file), over arbitrary text.
//!
//! One copy of each property, used by the cargo-fuzz targets and by the proptest suite that
//! CI runs on stable (`deadline-cli/tests/fuzz_parsers.rs`). Each `check_*` function panics
//! when a property fails.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use deadline_cli::{plan, sample, table};

/// A table, from arbitrary text, read with sample files relative to `base_dir`.
///
/// - Parsing never panics; a rejection is an error with a message naming the file.
/// - An accepted table has a positive budget, 1 to `MAX_DEPENDENCIES` dependencies with
///   distinct names, and latencies no larger than the sample file's limit; each
///   dependency's policy builds; and `deadline plan` over it (the command's next step) either
///   reports or returns an error, without panicking.
///
/// Text that names a sample file by a path leaving `base_dir` (a `/`, a `\`, which also
/// starts every TOML escape, or `..`) is skipped: a fuzzer must not read `/dev/zero`.
pub fn check_table(data: &[u8], base_dir: &Path) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains("samples") && (text.contains(['/', '\\']) || text.contains("..")) {
        return;
    }
    match table::parse("fuzz.toml", text, Some(base_dir)) {
        Ok(parsed) => {
            assert!(!parsed.budget.is_zero());
            assert!(!parsed.dependencies.is_empty());
            assert!(parsed.dependencies.len() <= table::MAX_DEPENDENCIES);
            let mut names = HashSet::new();
            let most = Duration::from_secs_f64(sample::MAX_MS / 1000.0);
            for dependency in &parsed.dependencies {
                assert!(
                    names.insert(dependency.name.as_str()),
                    "duplicate name accepted"
                );
                assert!(dependency.p50 <= most && dependency.p999 <= most);
                let _ = dependency.policy();
                let _ = dependency.floor();
                let _ = dependency.hedge_delay();
            }
            if let Err(error) = plan::run(&parsed, None) {
                assert!(!error.to_string().is_empty());
            }
        }
        Err(error) => {
            assert_eq!(error.file, "fuzz.toml");
            assert!(!error.to_string().is_empty());
        }
    }
}

/// A sample file, from arbitrary text, and one written from numbers made of it.
///
/// - Parsing never panics; an accepted file holds 1 to `MAX_CALLS` latencies, each at most
///   `MAX_MS`; a rejection names the file and (except for an empty sample) the line.
/// - Latencies written as whole microseconds in milliseconds (`12.345`, `12.345ms`,
///   `12.345 ms`, `12.345 x 3`), commas or spaces between them, with comments, read back
///   exactly.
pub fn check_sample(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        match sample::parse("fuzz.txt", text) {
            Ok(latencies) => {
                assert!(!latencies.is_empty() && latencies.len() <= sample::MAX_CALLS);
                let most = Duration::from_secs_f64(sample::MAX_MS / 1000.0);
                assert!(latencies.iter().all(|l| *l <= most));
            }
            Err(error) => {
                assert_eq!(error.file, "fuzz.txt");
                assert!(!error.to_string().is_empty());
            }
        }
        let _ = sample::parse_ms(text);
    }

    let mut text = String::new();
    let mut expected = Vec::new();
    for chunk in data.chunks(4).take(64) {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        let micros = u64::from(u32::from_le_bytes(word) >> (word[3] % 24));
        let latency = Duration::from_micros(micros);
        let written = format!("{}.{:03}", micros / 1000, micros % 1000);
        match word[0] % 5 {
            0 => text.push_str(&format!("{written}\n")),
            1 => text.push_str(&format!("{written}ms, ")),
            2 => text.push_str(&format!("{written} ms # a comment\n")),
            3 => {
                let count = usize::from(word[1] % 4) + 1;
                text.push_str(&format!("\n{written} x {count}\n"));
                expected.extend(std::iter::repeat_n(latency, count - 1));
            }
            _ => text.push_str(&format!("{written} ")),
        }
        expected.push(latency);
    }
    if expected.is_empty() {
        return;
    }
    let read = sample::parse("written.txt", &text).expect("a written sample reads back");
    assert_eq!(read, expected, "the sample file was:\n{text}");
}
