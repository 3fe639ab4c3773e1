//! `ringwire serve` and `ringwire mirror` as child processes of a test: the test executable
//! again, running one ignored test of its own that parses the command line held in an
//! environment variable with `ringwire::cli::Cli` and runs the subcommand exactly as the
//! `ringwire` binary does, so no separately built binary (which could be stale) is needed.

use std::process::{Command, ExitCode, Stdio};

/// The child's side, the body of the ignored entry-point test: runs the `ringwire` command
/// line in `env` (one argument a line) and exits with its status (2 when it does not parse).
/// Without the variable (the test run as such) it returns at once.
pub fn run_from_env(env: &str) {
    let Ok(args) = std::env::var(env) else {
        return;
    };
    let argv = std::iter::once("ringwire").chain(args.lines());
    let cli = match <ringwire::cli::Cli as clap::Parser>::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let code = match cli.command {
        ringwire::cli::Command::Serve(s) => s.run(),
        ringwire::cli::Command::Mirror(m) => m.run(),
        other => panic!("not a replication subcommand: {other:?}"),
    };
    std::process::exit(if code == ExitCode::SUCCESS { 0 } else { 1 });
}

/// The parent's side: runs the test `entry` of this executable with `ringwire args…` in
/// `env`; stdin and stdout are null, stderr is piped.
pub fn command(entry: &str, env: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args([
        "--exact",
        entry,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(env, args.join("\n"))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    cmd
}
