//! The `ringwire` command-line tool.
fn main() {}
