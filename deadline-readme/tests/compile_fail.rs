//! A policy that retries or hedges without saying whether a call may be repeated does not
//! compile: each program below is built as a crate of its own against deadline-core, and the
//! build must fail with the rule's own message, while the same program with `.idempotent()`
//! (or `.not_idempotent()`, for retries) builds. (The README's `compile_fail` doctest shows the
//! rule; rustdoc on stable does not check why a `compile_fail` example failed, so this test
//! does.)
//!
//! The builds are `cargo check --offline` of a one-file crate, in a target directory of their
//! own under the workspace's, so the second run is incremental.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (this crate's parent).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_path_buf()
}

/// Checks a crate whose `main.rs` is `program`; returns whether it built, and its errors.
fn check(name: &str, program: &str) -> (bool, String) {
    let root = workspace();
    let dir = root.join("target").join("compile-fail").join(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let core = root.join("deadline-core");
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
             [dependencies]\ndeadline-core = {{ path = {core:?}, features = [\"drive\"] }}\n\n[workspace]\n"
        ),
    )
    .unwrap();
    // The workspace's lock file: the same dependency versions, already downloaded.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("src").join("main.rs"), program).unwrap();
    let out = Command::new(env!("CARGO"))
        .args(["check", "--offline", "--quiet"])
        .current_dir(&dir)
        .env(
            "CARGO_TARGET_DIR",
            root.join("target").join("compile-fail").join("target"),
        )
        .output()
        .expect("cargo runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const PROGRAM: &str = r#"
use deadline_core::{Policy, ms};

static FLAKY: Policy = Policy::required("flaky")POLICY;

fn main() {
    println!("{}", FLAKY.retry().attempts());
}
"#;

fn program(policy: &str) -> String {
    PROGRAM.replace("POLICY", policy)
}

#[test]
fn retries_without_idempotence_do_not_compile() {
    let (built, errors) = check(
        "retries_unstated",
        &program(".with_cap(ms(100)).with_retries(5)"),
    );
    assert!(
        !built,
        "a policy that retries without a word on idempotence compiled"
    );
    assert!(
        errors.contains("error[E0080]")
            && errors.contains("retries need the policy to say whether a call may be repeated"),
        "it failed for another reason:\n{errors}"
    );

    // The same program, saying it either way, builds.
    for (name, said) in [
        ("retries_idempotent", ".idempotent()"),
        ("retries_not_idempotent", ".not_idempotent()"),
    ] {
        let (built, errors) = check(
            name,
            &program(&format!("{said}.with_cap(ms(100)).with_retries(5)")),
        );
        assert!(built, "{said} did not build:\n{errors}");
    }
}

#[test]
fn hedges_need_an_idempotent_policy() {
    for (name, policy) in [
        (
            "hedge_unstated",
            ".with_cap(ms(100)).with_hedge_after(ms(20))",
        ),
        (
            "hedge_not_idempotent",
            ".not_idempotent().with_cap(ms(100)).with_hedge_after(ms(20))",
        ),
    ] {
        let (built, errors) = check(name, &program(policy));
        assert!(!built, "{policy} compiled");
        assert!(
            errors.contains("error[E0080]") && errors.contains("hedges need an idempotent policy"),
            "{policy} failed for another reason:\n{errors}"
        );
    }
    let (built, errors) = check(
        "hedge_idempotent",
        &program(".idempotent().with_cap(ms(100)).with_hedge_after(ms(20))"),
    );
    assert!(
        built,
        "an idempotent hedged policy did not build:\n{errors}"
    );
}
