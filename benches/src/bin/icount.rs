//! Runs one benchmark scenario without timing, for callgrind
//! (`icount.sh` counts the instructions of its measured function).
//!
//! `icount list` prints `name symbol unit granule` per scenario;
//! `icount NAME ITERATIONS` runs ITERATIONS × granule units of NAME.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [cmd] if cmd == "list" => {
            for s in mlx5dp_benches::all() {
                println!("{} {} {} {}", s.name(), s.symbol(), s.unit(), s.granule());
            }
            ExitCode::SUCCESS
        }
        [name, iterations] => {
            let Some(mut s) = mlx5dp_benches::by_name(name) else {
                eprintln!("unknown scenario {name} (try `icount list`)");
                return ExitCode::FAILURE;
            };
            let Ok(iterations) = iterations.parse::<u64>() else {
                eprintln!("ITERATIONS must be a number");
                return ExitCode::FAILURE;
            };
            let units = iterations * s.granule();
            mlx5dp_benches::drive(&mut *s, units);
            println!("{} {} {}", s.name(), units, s.unit());
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: icount list | icount NAME ITERATIONS");
            ExitCode::FAILURE
        }
    }
}
