//! The `ringwire` command-line tool: `stat`, `top`, `dump`, `prune` (spec §26).

fn main() -> std::process::ExitCode {
    ringwire::cli::main()
}
