//! The `mlx5dp` command-line tool: a thin dispatcher. Each subcommand's
//! arguments and behaviour live in the library (`mlx5dp_setup::…::cli`), so
//! they can be tested without spawning the binary.

use clap::{Parser, Subcommand};
use mlx5dp_setup::decode::cli as decode_cli;
use mlx5dp_setup::encode::cli as encode_cli;
use mlx5dp_setup::{info, perf, trace_record};
use std::io::Write;
use std::process::ExitCode;

/// mlx5dp: a kernel-bypass data path for NVIDIA/Mellanox ConnectX (mlx5) NICs.
#[derive(Debug, Parser)]
#[command(name = "mlx5dp", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode CQE, WQE or mini-CQE bytes from a kernel, rdma-core or DPDK dump.
    Decode(decode_cli::DecodeArgs),
    /// Encode work requests into the exact WQEs and doorbells the core posts.
    Encode(encode_cli::EncodeArgs),
    /// The devices found and the chosen one's capabilities.
    Info(info::InfoArgs),
    /// Measure latency, bandwidth and packet rates (perftest / testpmd style).
    Perf(perf::PerfArgs),
    /// Record a short scenario's rings as hw-traces/ records, or replay a trace file.
    Trace(trace_record::TraceArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            // Usage errors in one line, status 2: clap's first line only.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            eprintln!("mlx5dp: {}", first.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let result = match &cli.command {
        Command::Decode(args) => decode_cli::run(args, &mut std::io::stdin().lock())
            .map_err(|e| (e.exit_code(), e.to_string())),
        Command::Encode(args) => {
            let out = encode_cli::run(args, &mut std::io::stdin().lock());
            // Printed even on error: what was posted before a refused work request.
            let _ = std::io::stdout().lock().write_all(out.stdout.as_bytes());
            out.result
                .map(|()| String::new())
                .map_err(|e| (e.exit_code(), e.to_string()))
        }
        Command::Info(args) => info::run(args).map_err(|e| (e.exit_code(), e.to_string())),
        Command::Perf(args) => perf::run(args).map_err(|e| (e.exit_code(), e.to_string())),
        Command::Trace(args) => trace_record::run(args).map_err(|e| (e.exit_code(), e.to_string())),
    };
    match result {
        Ok(text) => {
            // A closed pipe (`| head`) is not an error worth reporting.
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            eprintln!("mlx5dp: {message}");
            ExitCode::from(code)
        }
    }
}
