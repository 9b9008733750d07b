//! `deadline`: turns measured latencies into timeouts a team can defend, and shows what
//! deadlines save. See `deadline --help`.

fn main() {
    std::process::exit(deadline_cli::cli::main());
}
