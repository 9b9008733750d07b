//! `calls SCENARIO N`: makes N calls in one scenario of `deadline_bench::run`, for
//! valgrind's callgrind (`scripts/instructions.sh` runs it twice per scenario, at two values
//! of N, and divides the difference by the difference of N: the cost of one call, without
//! the start-up's). `calls base SCENARIO` prints the scenario it is compared with, if any.

fn main() {
    let mut args = std::env::args().skip(1);
    if std::env::args().nth(1).as_deref() == Some("sizes") {
        let runtime = deadline_bench::runtime();
        let _entered = runtime.enter();
        for (name, size) in deadline_bench::future_sizes() {
            println!("{name}: {size} bytes");
        }
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("base") {
        let name = std::env::args().nth(2).unwrap_or_default();
        if let Some(base) = deadline_bench::base_of(&name) {
            println!("{base}");
        }
        return;
    }
    let (Some(name), Some(n)) = (args.next(), args.next()) else {
        eprintln!(
            "usage: calls SCENARIO N; scenarios: {}",
            deadline_bench::SCENARIOS.join(" ")
        );
        std::process::exit(2);
    };
    let Ok(n) = n.parse::<u64>() else {
        eprintln!("calls: N must be a whole number, not {n:?}");
        std::process::exit(2);
    };
    match deadline_bench::runtime().block_on(deadline_bench::run(&name, n)) {
        Some(sum) => println!("{name}: {n} calls, sum {sum}"),
        None => {
            eprintln!(
                "calls: no scenario {name:?}; scenarios: {}",
                deadline_bench::SCENARIOS.join(" ")
            );
            std::process::exit(2);
        }
    }
}
