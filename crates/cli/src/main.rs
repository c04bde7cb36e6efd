//! `aiac`, the command-line tool: see the `cli` crate's documentation (`src/lib.rs`).

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main_with(std::env::args_os())
}
