//! `ringwire prune <PATH>`: frees the registry slots of dead readers (spec §9, §26).

use std::cell::RefCell;
use std::io::Write;
use std::path::Path;

use ringwire_core::Expect;
use ringwire_core::broadcast::registry;

use super::out_err;
use crate::error::Result;
use crate::file::RingFile;
use crate::sys::pid_alive;

pub(super) fn run(path: &Path, out: &mut dyn Write) -> Result<()> {
    let ring = RingFile::open(path, Expect::RAW)?;
    let oe = out_err(path);
    if ring.ring().geometry().registry_offset == 0 {
        return writeln!(
            out,
            "ring {} has no reader registry; nothing to prune",
            path.display()
        )
        .map_err(oe);
    }
    let dead = RefCell::new(Vec::new());
    let freed = registry::prune_dead(ring.ring(), |pid| {
        let alive = pid_alive(pid);
        if !alive {
            dead.borrow_mut().push(pid);
        }
        alive
    });
    for pid in dead.borrow().iter() {
        writeln!(out, "pruned dead reader pid {pid}").map_err(&oe)?;
    }
    writeln!(out, "pruned {freed} dead reader(s)").map_err(oe)
}
