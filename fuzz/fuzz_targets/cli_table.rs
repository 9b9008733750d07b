#![no_main]

#[path = "../props/cli.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let base_dir =
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deadline-cli/data"));
    props::check_table(data, base_dir);
});
