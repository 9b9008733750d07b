//! The README, checked: its examples compile and run as this crate's doctests, against the
//! dependencies its `Cargo.toml` blocks name, and `tests/` holds the programs a newcomer
//! writes from it alone. Nothing here is published.

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
