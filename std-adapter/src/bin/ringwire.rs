//! The `ringwire` command-line tool: `stat`, `top`, `dump`, `prune` (spec §26), `version`,
//! `bench`, and the replication drivers `serve`, `mirror` and `demo` (see `ringwire --help`).

fn main() -> std::process::ExitCode {
    ringwire::cli::main()
}
