//! The `ringwire` command-line tool.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ringwire::replica::cli::{DemoArgs, MirrorArgs, ServeArgs};

#[derive(Parser)]
#[command(
    name = "ringwire",
    version,
    about = "ringwire: shared-memory rings and their replication"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Stream a ring to mirrors over TCP, UDP multicast or UDP unicast.
    Serve(ServeArgs),
    /// Keep a local copy of a remote ring.
    Mirror(MirrorArgs),
    /// Source, serve, mirror and a latency reader on this machine, over loopback.
    Demo(DemoArgs),
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Command::Serve(a) => a.run(),
        Command::Mirror(a) => a.run(),
        Command::Demo(a) => a.run(),
    }
}
