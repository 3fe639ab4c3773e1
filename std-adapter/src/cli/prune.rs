//! `ringwire prune <PATH>`: frees the registry slots of dead readers (spec §9, §26).

use std::io::Write;
use std::path::Path;

use ringwire_core::Expect;
use ringwire_core::broadcast::registry;
use ringwire_core::ring::RingView;

use super::out_err;
use crate::error::Result;
use crate::file::RingFile;
use crate::sys::reader_alive;

/// `registry::prune_dead_by`, returning the pids it freed (not those whose CAS lost a race).
fn prune_dead(view: &RingView, is_alive: impl Fn(u32, u64) -> bool) -> Vec<u32> {
    let mut freed = Vec::new();
    registry::prune_dead_by(view, is_alive, |pid| freed.push(pid));
    freed
}

pub(super) fn run(path: &Path, out: &mut dyn Write) -> Result<()> {
    let ring = RingFile::open(path, Expect::RAW)?;
    let oe = out_err();
    if ring.ring().geometry().registry_offset == 0 {
        return writeln!(
            out,
            "ring {} has no reader registry; nothing to prune",
            crate::shown::path(path)
        )
        .map_err(oe);
    }
    let freed = prune_dead(ring.ring(), reader_alive);
    for pid in &freed {
        writeln!(out, "pruned dead reader pid {pid}").map_err(&oe)?;
    }
    writeln!(out, "pruned {} dead reader(s)", freed.len()).map_err(oe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::CreateOptions;
    use ringwire_core::Geometry;
    use ringwire_core::layout::reg;
    use ringwire_core::sync::Ordering;

    /// A ring with a 4-slot registry, unlinked when dropped.
    fn ring(name: &str) -> RingFile {
        let path = std::env::temp_dir().join(format!("fixc-prune-{name}-{}", std::process::id()));
        let geo = Geometry::spmc(16, 16, 8, 4, false).unwrap();
        RingFile::create(&path, &geo, &CreateOptions::default()).unwrap()
    }

    const DEAD: u32 = i32::MAX as u32 - 1;

    #[test]
    fn reports_the_dead_readers_it_freed() {
        let r = ring("freed");
        let me = std::process::id();
        registry::register(r.ring(), me, "me", 1, |_| true).unwrap();
        registry::register(r.ring(), DEAD, "ghost", 1, |_| true).unwrap();
        assert_eq!(prune_dead(r.ring(), |pid, _| pid == me), vec![DEAD]);
        let live: Vec<u32> = registry::live_readers(r.ring()).map(|x| x.pid).collect();
        assert_eq!(live, vec![me]);
    }

    /// Between the pruner's load and its CAS, a new reader takes the dead reader's slot:
    /// the CAS fails, nothing is freed, and nothing may be reported as pruned.
    #[test]
    fn a_lost_cas_is_not_reported() {
        let r = ring("lost");
        let slot = registry::register(r.ring(), DEAD, "ghost", 1, |_| true).unwrap();
        let newcomer = std::process::id();
        let freed = prune_dead(r.ring(), |pid, _| {
            if pid == DEAD {
                let w = r.ring().registry_a32(slot, reg::PID).unwrap();
                w.store(newcomer, Ordering::Release);
            }
            false
        });
        assert_eq!(freed, Vec::<u32>::new());
        let pid = r.ring().registry_a32(slot, reg::PID).unwrap();
        assert_eq!(pid.load(Ordering::Acquire), newcomer);
    }
}
