//! Puts `memory.x` where the linker finds it, and tells the firmware which board its target
//! runs on under QEMU (the SysTick clock differs).

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::copy("memory.x", out.join("memory.x")).expect("memory.x is copied to OUT_DIR");
    println!("cargo::rustc-link-search={}", out.display());
    println!("cargo::rerun-if-changed=memory.x");
    println!("cargo::rerun-if-changed=build.rs");

    // thumbv6m (Cortex-M0) runs on QEMU's `microbit`; thumbv7m and thumbv7em on `mps2-an385`
    // and `mps2-an386`.
    println!("cargo::rustc-check-cfg=cfg(board, values(\"microbit\", \"mps2\"))");
    let target = env::var("TARGET").unwrap_or_default();
    let board = if target.starts_with("thumbv6m") {
        "microbit"
    } else {
        "mps2"
    };
    println!("cargo::rustc-cfg=board=\"{board}\"");
}
