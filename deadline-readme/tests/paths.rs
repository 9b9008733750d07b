//! Every path the README names exists: each is imported below (so this file compiles only
//! while it does), and the test reads the README and fails on any `deadline_*::..` path it
//! names that is not imported here. The README's table names the rest of its items by their
//! crate; they are imported here too.

#![allow(unused_imports)]

// The crate paths the README's prose names.
use deadline_core::Dependency as CoreDependency;
use deadline_core::Error;
use deadline_core::drive;
use deadline_core::drive::DeadlineOnly;
use deadline_core::guide;
use deadline_core::ms;
use deadline_core::runtime;
use deadline_core::runtime::scope_timeout as core_scope_timeout;
use deadline_core::statement::StatementPolicy;
use deadline_core::statement::grpc_code_of_sqlstate;
use deadline_core::wire as _;
use deadline_embassy::Embassy;
use deadline_embassy::Entropy;
use deadline_std::Blocking;
use deadline_std::StdClock;
use deadline_std::net::Bounded;
use deadline_std::net::arm_read;
use deadline_std::net::connect;
use deadline_tokio::Dependency;
use deadline_tokio::Tokio;
use deadline_tokio::layer;
use deadline_tokio::low_level;
use deadline_tokio::postgres::Database;
use deadline_tokio::postgres::classify as postgres_classify;
use deadline_tokio::reqwest;
use deadline_tokio::reqwest::classify;
use deadline_tokio::scope_timeout;
use deadline_tokio::sqlx::classify as sqlx_classify;
use deadline_tokio::sqlx::fetch_all;
use deadline_tokio::tonic::classify as tonic_classify;

// The items of the "One way per job" table, in the crates it names.
use deadline_core::{CallError, Policy, Steps};
use deadline_core::{breaker, budget, call, observe, wire};
use deadline_tokio::layer::PropagateLayer;
use deadline_tokio::postgres::Session;
use deadline_tokio::reqwest::DeadlineRequest;
use deadline_tokio::sqlx::execute;
use deadline_tokio::{DeadlineLayer, DependencyLayer};

#[test]
fn every_path_the_readme_names_is_imported_here() {
    let readme = include_str!("../../README.md");
    let here = include_str!("paths.rs");
    let mut missing = Vec::new();
    for (at, _) in readme.match_indices("deadline_") {
        let path: String = readme[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let path = path.trim_end_matches(':');
        // A crate name alone, or inside a longer word (`deadline_only`), names no path.
        if !path.contains("::") || !path.starts_with("deadline_") {
            continue;
        }
        let crate_name = path.split("::").next().unwrap_or_default();
        if ![
            "deadline_core",
            "deadline_tokio",
            "deadline_std",
            "deadline_embassy",
        ]
        .contains(&crate_name)
        {
            continue;
        }
        if !here.contains(&format!("use {path};")) && !here.contains(&format!("use {path} as ")) {
            missing.push(path.to_owned());
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "README paths not imported (so not checked): {missing:?}"
    );
}
