//! The reader registry (spec §9) and the lossless gate built on it (spec §6).
//!
//! Readers claim a 64-byte registry slot by CAS on its `pid`, fill it in and then
//! release-store `active = 1`; the producer scans the live slots (`active == 1 && pid != 0`)
//! for the smallest cursor and never writes more than one lap past it. Everything here works
//! on a [`RingView`] and the caller's idea of process liveness (`is_alive`), so the core stays
//! free of system calls.
//!
//! # Liveness
//!
//! The reference judges a slot's reader by its pid alone: alive while `kill(pid, 0)`
//! succeeds or fails with `EPERM`. That keeps two kinds of dead reader alive: one that exited
//! but whose parent has not reaped it yet (a zombie), which held a lossless producer for up
//! to its push timeout; and one whose pid was given to an unrelated process after it died,
//! which held its slot for as long as that process lived. The std side's check (`ringwire`'s
//! `registry::is_reader_alive`) adds two rules where `/proc` belongs to the caller's PID
//! namespace:
//!
//! * a process in state `Z` or `X` (`/proc/<pid>/stat`) is dead;
//! * a slot whose token carries its registrant's [`Incarnation`] (start time and PID
//!   namespace; our registrants store one, [`register_owner_as`]) is dead when the process
//!   now at that pid started at another time. A token from another PID namespace, where the
//!   pid means something else, is judged by the pid alone, as before.
//!
//! Slots with token 0 (ringfire's readers) or a token without an incarnation (earlier
//! ringwire releases, a registrant that could not read its own start time) keep the first
//! rule and the reference's. The functions here that take `is_alive(pid, token)`
//! ([`register_owner_as`], [`prune_dead_by`]) pass the slot's token; those that take
//! `is_alive(pid)` are kept for callers that judge by the pid alone. Both clear a dead
//! slot's token by CAS before they free or claim its pid, so that a token is never read with
//! the pid of a later owner (see [`prune_dead_by`]).

use core::fmt;

use crate::layout::{REGISTRY_NAME_LEN, reg};
use crate::ring::RingView;
use crate::sync::Ordering;

/// Why a registry operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum RegistryError {
    /// The ring has no reader registry (`reader_registry_offset == 0`).
    NoRegistry,
    /// Every slot belongs to a live reader (ringfire's *NoAvailableReaderSlots*).
    Full {
        /// Number of registry slots.
        count: u32,
    },
    /// Pid 0 means "free slot" and cannot own one.
    ZeroPid,
    /// The slot index is outside the registry.
    BadSlot {
        /// The index passed.
        slot: u32,
        /// Number of registry slots.
        count: u32,
    },
    /// The slot is owned by another pid (it was pruned as dead and reused, or never ours).
    NotOwner {
        /// The index passed.
        slot: u32,
        /// The pid that was expected.
        pid: u32,
        /// The pid found in the slot.
        found: u32,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RegistryError::NoRegistry => f.write_str("the ring has no reader registry"),
            // A registry of no slots (a lossless ring's is never made so: a corrupt count)
            // has no live readers to blame.
            RegistryError::Full { count: 0 } => {
                f.write_str("the reader registry has 0 slots (its header's count is 0)")
            }
            RegistryError::Full { count } => {
                write!(f, "all {count} reader registry slots hold live readers")
            }
            RegistryError::ZeroPid => f.write_str("pid 0 cannot own a reader registry slot"),
            RegistryError::BadSlot { slot, count } => write!(
                f,
                "reader registry slot {slot} does not exist (the registry has {count})"
            ),
            RegistryError::NotOwner { slot, pid, found } => write!(
                f,
                "reader registry slot {slot} belongs to pid {found}, not {pid}"
            ),
        }
    }
}

impl core::error::Error for RegistryError {}

/// One live reader as seen by a registry scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LiveReader {
    /// Registry slot index.
    pub slot: u32,
    /// Owning process id.
    pub pid: u32,
    /// Next sequence the reader will read.
    pub cursor: u64,
}

/// A registry name as stored: at most 31 bytes of `name` (cut by bytes, so a multi-byte
/// UTF-8 character may be split, as in the reference), NUL-padded to 32.
pub fn encode_name(name: &str) -> [u8; REGISTRY_NAME_LEN] {
    let mut out = [0u8; REGISTRY_NAME_LEN];
    let n = name.len().min(REGISTRY_NAME_LEN - 1);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

/// The bytes of a stored name up to its first NUL.
pub fn name_bytes(raw: &[u8; REGISTRY_NAME_LEN]) -> &[u8] {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    &raw[..end]
}

fn check_registry(view: &RingView) -> Result<u32, RegistryError> {
    let g = view.geometry();
    if g.registry_offset == 0 {
        return Err(RegistryError::NoRegistry);
    }
    Ok(g.registry_count)
}

/// A registration as its reader holds it: the slot, the pid it registered as, and the token
/// it left in the slot's `heartbeat_tsc` ([`publish_cursor_as`] checks both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Owner {
    /// The registry slot.
    pub slot: u32,
    /// The pid registered.
    pub pid: u32,
    /// The token stored in the slot's `heartbeat_tsc` (never 0).
    pub token: u64,
}

/// What a registrant knows of its own process beyond its pid, carried in its token so that a
/// liveness check can tell the registrant from a later process that got the same pid
/// ([`token_incarnation`]).
///
/// Both values are cut to the bits the token has room for: `start` to 20 bits (at Linux's
/// 100 ticks a second they wrap every 2.9 hours, so a reused pid whose start differs by a
/// multiple of that passes for the registrant, and is judged as before, by its pid alone)
/// and `pid_ns` to 12 (namespaces whose numbers differ by a multiple of 4096 look alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Incarnation {
    /// The process's start time in clock ticks since boot, as the boot clock of the initial
    /// time namespace counts it, modulo 2^20.
    pub start: u32,
    /// The low 12 bits of the inode number of the process's PID namespace.
    pub pid_ns: u16,
}

impl Incarnation {
    const START_BITS: u32 = 20;
    const NS_BITS: u32 = 12;

    /// The incarnation of a process that started `start_ticks` after boot (initial time
    /// namespace) in the PID namespace whose inode number is `pid_ns_inode`.
    #[must_use]
    pub const fn new(start_ticks: u64, pid_ns_inode: u64) -> Incarnation {
        Incarnation {
            start: (start_ticks & ((1 << Self::START_BITS) - 1)) as u32,
            pid_ns: (pid_ns_inode & ((1 << Self::NS_BITS) - 1)) as u16,
        }
    }

    /// Whether a process that started `start_ticks` after boot (cut as in
    /// [`Incarnation::new`]) may be this one: the same start give or take one tick, which
    /// the conversion of a time namespace's offset to ticks may round away.
    #[must_use]
    pub const fn may_have_started_at(self, start_ticks: u64) -> bool {
        let mask = (1u32 << Self::START_BITS) - 1;
        let d = ((start_ticks as u32).wrapping_sub(self.start)) & mask;
        d == 0 || d == 1 || d == mask
    }
}

/// Where a token's parts sit. A tagged token (one that carries an [`Incarnation`]) is
///
/// | bits | |
/// |---|---|
/// | 0–19 | a counter of this process's registrations |
/// | 20–27 | a check of the rest and the registered pid |
/// | 28–31 | the tag `0xA` |
/// | 32–43 | [`Incarnation::pid_ns`] |
/// | 44–63 | [`Incarnation::start`] |
///
/// Bits 28–31 are where the tokens of earlier ringwire releases (a counter XOR the address
/// of a static turned by 32 bits) hold bits 60–63 of a user-space address and bits 28–31
/// of the counter: all zero unless a process registered 2^28 times. Such tokens, ringfire's
/// 0, and untagged tokens of ours ([`new_token`] clears those bits) carry no incarnation.
/// The check ties the token to the pid it was made for: a stale token left behind a new
/// registrant that does not clear it (a ringfire reader) is, with odds of 255 in 256, not
/// taken for the new registrant's.
mod token {
    pub(super) const COUNTER_BITS: u32 = 20;
    pub(super) const TAG_SHIFT: u32 = 28;
    pub(super) const TAG: u64 = 0xA;
    pub(super) const TAG_MASK: u64 = 0xF << TAG_SHIFT;
    pub(super) const CHECK_SHIFT: u32 = 20;
    pub(super) const NS_SHIFT: u32 = 32;
    pub(super) const START_SHIFT: u32 = 44;

    /// Eight bits that depend on every bit of `pid`, `start` and `pid_ns`.
    pub(super) const fn check(pid: u32, start: u32, pid_ns: u16) -> u64 {
        let x = (pid as u64) ^ ((pid_ns as u64) << 32) ^ ((start as u64) << 44);
        x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56
    }
}

/// A token for a new registration of `pid`, different from every other one this process
/// made (as long as it made fewer than 2^20 registrations between them, for a tagged one)
/// and very likely from other processes': a tagged token carries the registrant's
/// incarnation (two readers in two PID namespaces that share a pid differ by it), an
/// untagged one the address of a static, randomised per process where the loader does so.
/// Never 0.
fn new_token(pid: u32, incarnation: Option<Incarnation>) -> u64 {
    // A plain counter, not a region word: portable-atomic's type under loom too (the token
    // orders nothing; it only has to differ).
    static NEXT: portable_atomic::AtomicU64 = portable_atomic::AtomicU64::new(1);
    // Relaxed: only the values' uniqueness matters.
    let n = NEXT.fetch_add(1, portable_atomic::Ordering::Relaxed);
    if let Some(Incarnation { start, pid_ns }) = incarnation {
        return (u64::from(start) << token::START_SHIFT)
            | (u64::from(pid_ns) << token::NS_SHIFT)
            | (token::TAG << token::TAG_SHIFT)
            | (token::check(pid, start, pid_ns) << token::CHECK_SHIFT)
            | (n & ((1 << token::COUNTER_BITS) - 1));
    }
    let salt = (core::ptr::addr_of!(NEXT) as usize as u64).rotate_left(32);
    match (n ^ salt) & !token::TAG_MASK {
        0 => !token::TAG_MASK,
        t => t,
    }
}

/// The incarnation a slot's token says its registrant `pid` had, or `None` when the token
/// carries none (ringfire's 0, an earlier ringwire's token, one made without an
/// incarnation) or was not made for `pid`.
#[must_use]
pub const fn token_incarnation(pid: u32, token: u64) -> Option<Incarnation> {
    if (token & token::TAG_MASK) >> token::TAG_SHIFT != token::TAG {
        return None;
    }
    let inc = Incarnation {
        start: (token >> token::START_SHIFT) as u32,
        pid_ns: ((token >> token::NS_SHIFT) & 0xFFF) as u16,
    };
    if (token >> token::CHECK_SHIFT) & 0xFF != token::check(pid, inc.start, inc.pid_ns) {
        return None;
    }
    Some(inc)
}

/// Registers a reader (spec §9): scans the slots from index 0 for one that is free
/// (`pid == 0`) or owned by a dead process (`!is_alive(pid)`), claims it by CAS on `pid`,
/// stores `active = 0`, the cursor, `heartbeat_tsc` and the name (cut to 31 bytes), then
/// release-stores `active = 1`. Returns the slot index.
///
/// Beyond the reference, which stores `heartbeat_tsc = 0` and never reads it: the field
/// holds a token of this registration ([`register_owner`] returns it), by which a reader
/// whose slot was pruned and taken again, even by a reader of the same process (same pid),
/// knows the slot is no longer its own ([`publish_cursor_as`]).
///
/// `is_alive` is the caller's liveness test; the reference treats `kill(pid, 0) == 0` or
/// `EPERM` as alive and any pid above `i32::MAX` as dead. The token stored here carries no
/// incarnation; [`register_owner_as`] stores one that does.
pub fn register(
    view: &RingView,
    pid: u32,
    name: &str,
    start_cursor: u64,
    is_alive: impl Fn(u32) -> bool,
) -> Result<u32, RegistryError> {
    register_owner(view, pid, &encode_name(name), start_cursor, is_alive).map(|o| o.slot)
}

/// [`register`] with the name encoded ([`encode_name`]), returning the whole registration:
/// what [`publish_cursor_as`] needs (a reader whose slot was pruned registers again under
/// the name it kept).
pub fn register_owner(
    view: &RingView,
    pid: u32,
    encoded: &[u8; REGISTRY_NAME_LEN],
    start_cursor: u64,
    is_alive: impl Fn(u32) -> bool,
) -> Result<Owner, RegistryError> {
    register_owner_as(view, pid, encoded, start_cursor, None, |p, _| is_alive(p))
}

/// [`register_owner`] for a registrant that knows its `incarnation` (its token then carries
/// it, see [`token_incarnation`]), judging the slots it finds taken by `is_alive(pid,
/// token)`, the slot's pid and the token in its `heartbeat_tsc`.
///
/// Before it claims a slot it clears the token it saw there (CAS `token → 0`), so that from
/// the claim on the slot shows our pid next to 0 or our own token, never next to a stale
/// one: a stale token of an earlier process with our pid would have a liveness check that
/// reads it with our pid judge us dead. A pruner does the same before it frees a slot
/// ([`prune_dead_by`]), so a check that judged a slot by a token which is gone by the time
/// it acts frees nothing: its CAS on the token fails. A token is judged only with a pid
/// loaded both before and after it: with a pid loaded before another registrant's claim, a
/// token loaded after it is the new owner's, and clearing it took that registration.
pub fn register_owner_as(
    view: &RingView,
    pid: u32,
    encoded: &[u8; REGISTRY_NAME_LEN],
    start_cursor: u64,
    incarnation: Option<Incarnation>,
    is_alive: impl Fn(u32, u64) -> bool,
) -> Result<Owner, RegistryError> {
    let count = check_registry(view)?;
    if pid == 0 {
        return Err(RegistryError::ZeroPid);
    }
    for i in 0..count {
        let (Some(pid_w), Some(active), Some(cursor), Some(heartbeat)) = (
            view.registry_a32(i, reg::PID),
            view.registry_a32(i, reg::ACTIVE),
            view.registry_a64(i, reg::CURSOR_SEQ),
            view.registry_a64(i, reg::HEARTBEAT_TSC),
        ) else {
            break;
        };
        // Acquire: if the slot was freed, we see its previous owner's last stores, and the
        // token its claimant or pruner cleared before the CAS that left this pid.
        let mut seen = pid_w.load(Ordering::Acquire);
        let claimed = loop {
            // Acquire: pairs with the AcqRel CAS of a claimant or pruner that cleared it, and
            // with a registrant's release store of its token (made after its claim of the pid).
            let token = heartbeat.load(Ordering::Acquire);
            // Acquire: a token stored by a registrant that claimed the slot since `seen` was
            // loaded shows that claim here; judged (and cleared) with `seen`, it would be
            // taken from its live owner, whose publishes and unregister then fail.
            let now = pid_w.load(Ordering::Acquire);
            if now != seen {
                seen = now;
                continue;
            }
            if seen != 0 && is_alive(seen, token) {
                break false;
            }
            // AcqRel: the clear happens before our claim below, for every scanner that
            // acquires the pid we store.
            if token != 0
                && heartbeat
                    .compare_exchange(token, 0, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
            {
                // A claimant or a pruner got here first: judge the slot again.
                seen = pid_w.load(Ordering::Acquire);
                continue;
            }
            // AcqRel (spec §9): acquire the previous owner's state, release our claim.
            match pid_w.compare_exchange(seen, pid, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break true,
                // Someone else changed the pid (a pruner freed it, or a reader took it):
                // judge the slot again by its new owner rather than giving it up.
                Err(now) => seen = now,
            }
        };
        if !claimed {
            continue;
        }
        // Relaxed: the release store of active = 1 below publishes all of these fields.
        active.store(0, Ordering::Relaxed);
        // Relaxed: published by the release store of active = 1.
        cursor.store(start_cursor, Ordering::Relaxed);
        let token = new_token(pid, incarnation);
        // Release: a check that acquires it judges our pid by it; until then it sees the 0
        // we left (judged by the pid alone). Published to scanners by active = 1 as well.
        heartbeat.store(token, Ordering::Release);
        view.set_registry_name(i, encoded);
        // Release: a scanner that acquires active == 1 sees the cursor and name above.
        active.store(1, Ordering::Release);
        return Ok(Owner {
            slot: i,
            pid,
            token,
        });
    }
    Err(RegistryError::Full { count })
}

/// Unregisters (spec §9) by CAS `pid: own → 0` (release), and nothing else. Fails without
/// touching the slot when it is no longer owned by `pid` (it was pruned and reused by
/// another reader).
///
/// The reference release-stores `active = 0` before that CAS. But `active` is not guarded
/// by the pid: a reader whose slot was pruned (its pid judged dead) and re-taken between its
/// ownership check and that store would clear the new owner's `active`, and a lossless
/// producer would stop counting a live reader. The CAS alone ends the registration just as
/// well: a live reader is `active == 1 && pid != 0`, the state a prune leaves is the same
/// (`active` untouched, pid 0), and every registrant stores `active = 0` right after its
/// claim of the pid and publishes `active = 1` last. The final bytes differ from the
/// reference's only in `active`, which no reader of either side looks at while `pid == 0`.
pub fn unregister(view: &RingView, slot: u32, pid: u32) -> Result<(), RegistryError> {
    let count = check_registry(view)?;
    let pid_w = view
        .registry_a32(slot, reg::PID)
        .ok_or(RegistryError::BadSlot { slot, count })?;
    if pid == 0 {
        // Pid 0 owns nothing (a CAS 0 → 0 would "free" a free slot).
        // Relaxed: only reported.
        let found = pid_w.load(Ordering::Relaxed);
        return Err(RegistryError::NotOwner { slot, pid, found });
    }
    // Release: a scanner that acquires pid == 0 sees our last cursor store before it, and
    // whoever claims the slot next (AcqRel CAS) sees everything we did.
    match pid_w.compare_exchange(pid, 0, Ordering::Release, Ordering::Relaxed) {
        Ok(_) => Ok(()),
        Err(found) => Err(RegistryError::NotOwner { slot, pid, found }),
    }
}

/// [`unregister`] for the reader registered as `owner`: also fails, touching nothing, when
/// the slot holds `owner`'s pid under another registration's token (both readers of one
/// process were pruned, and the other one took this slot again). The load of the token and
/// the CAS leave the window [`publish_cursor_as`] leaves.
pub fn unregister_owner(view: &RingView, owner: Owner) -> Result<(), RegistryError> {
    let Owner { slot, pid, token } = owner;
    let count = check_registry(view)?;
    let token_w = view
        .registry_a64(slot, reg::HEARTBEAT_TSC)
        .ok_or(RegistryError::BadSlot { slot, count })?;
    // Relaxed: a guard against a stale owner, as in `publish_cursor_as`; the CAS leaves 0,
    // ringfire's value, for the next registrant (a stale token of ours left in the slot
    // could be read with that registrant's pid). A check that reads 0 next to our pid judges
    // it by the pid alone: alive, as we are.
    if token_w
        .compare_exchange(token, 0, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        // Relaxed: only reported.
        let found = view
            .registry_a32(slot, reg::PID)
            .map_or(0, |w| w.load(Ordering::Relaxed));
        return Err(RegistryError::NotOwner { slot, pid, found });
    }
    unregister(view, slot, pid)
}

/// Publishes a reader's cursor (the next sequence it will read) with a release store, so a
/// producer that acquires it knows every read before it has finished.
#[inline]
pub fn publish_cursor(view: &RingView, slot: u32, cursor: u64) -> Result<(), RegistryError> {
    let count = check_registry(view)?;
    let w = view
        .registry_a64(slot, reg::CURSOR_SEQ)
        .ok_or(RegistryError::BadSlot { slot, count })?;
    // Release: the producer may overwrite the slots below `cursor` once it sees this value.
    w.store(cursor, Ordering::Release);
    Ok(())
}

/// The cursor registry slot `slot` holds (`None` for a slot outside the registry). A
/// reader polling an empty ring compares it with its own now and then: another process may
/// have scribbled on it, and a lossless producer goes by this value.
#[must_use]
pub fn published_cursor(view: &RingView, slot: u32) -> Option<u64> {
    // Relaxed: compared with the reader's own cursor only; a store follows when they differ.
    view.registry_a64(slot, reg::CURSOR_SEQ)
        .map(|w| w.load(Ordering::Relaxed))
}

/// [`publish_cursor`] for the reader registered as `owner`: stores nothing, and fails with
/// [`RegistryError::NotOwner`], when the slot no longer holds that registration (its pid and
/// the token in `heartbeat_tsc`). A pruner that judged the reader dead (its pid not alive as
/// the pruner sees it: another PID namespace, say) freed the slot, and another reader may
/// own it now, perhaps one of the same process, whose cursor a store would overwrite: a
/// lossless producer would then go by the wrong reader's cursor (overwriting what the new
/// owner has not read, or waiting on a cursor that never moves). The check loads the line
/// the store writes anyway. It cannot close the window between the load and the store: a
/// slot pruned and taken again inside it gets one stale store, which its new owner's next
/// publish replaces.
#[inline]
pub fn publish_cursor_as(view: &RingView, owner: Owner, cursor: u64) -> Result<(), RegistryError> {
    let Owner { slot, pid, token } = owner;
    let count = check_registry(view)?;
    let (Some(w), Some(pid_w), Some(token_w)) = (
        view.registry_a64(slot, reg::CURSOR_SEQ),
        view.registry_a32(slot, reg::PID),
        view.registry_a64(slot, reg::HEARTBEAT_TSC),
    ) else {
        return Err(RegistryError::BadSlot { slot, count });
    };
    // Relaxed (both): a guard against a stale owner, not a synchronisation; the release
    // store below orders the reads as in `publish_cursor`.
    let found = pid_w.load(Ordering::Relaxed);
    if found != pid || token_w.load(Ordering::Relaxed) != token {
        return Err(RegistryError::NotOwner { slot, pid, found });
    }
    // Release: as in `publish_cursor`.
    w.store(cursor, Ordering::Release);
    Ok(())
}

/// Reads registry slot `i` if it holds a live reader (`active == 1 && pid != 0`).
#[must_use]
pub fn live_reader(view: &RingView, i: u32) -> Option<LiveReader> {
    let active = view.registry_a32(i, reg::ACTIVE)?;
    // Acquire: pairs with register's release store of active = 1, so the cursor we load
    // is at least the start cursor.
    if active.load(Ordering::Acquire) != 1 {
        return None;
    }
    // Acquire: if unregister's release CAS already zeroed the pid, everything that reader
    // did before leaving is visible too, so the scan agrees with its program order.
    let pid = view.registry_a32(i, reg::PID)?.load(Ordering::Acquire);
    if pid == 0 {
        return None;
    }
    // Acquire: pairs with publish_cursor, so the reader's reads below `cursor` are done.
    let cursor = view
        .registry_a64(i, reg::CURSOR_SEQ)?
        .load(Ordering::Acquire);
    Some(LiveReader {
        slot: i,
        pid,
        cursor,
    })
}

/// Iterator over the live readers of a ring's registry, in slot order (no allocation).
#[derive(Debug)]
pub struct LiveReaders<'a> {
    view: &'a RingView,
    next: u32,
    count: u32,
}

impl Iterator for LiveReaders<'_> {
    type Item = LiveReader;

    fn next(&mut self) -> Option<LiveReader> {
        while self.next < self.count {
            let i = self.next;
            self.next += 1;
            if let Some(r) = live_reader(self.view, i) {
                return Some(r);
            }
        }
        None
    }
}

/// The live readers of `view` (empty when the ring has no registry).
#[must_use]
pub fn live_readers(view: &RingView) -> LiveReaders<'_> {
    let count = check_registry(view).unwrap_or(0);
    LiveReaders {
        view,
        next: 0,
        count,
    }
}

/// The smallest cursor of any live reader, or `None` when no reader is registered.
#[must_use]
pub fn min_live_cursor(view: &RingView) -> Option<u64> {
    live_readers(view).map(|r| r.cursor).min()
}

/// Frees every slot whose pid belongs to a dead process (CAS `pid: dead → 0`, spec §9) and
/// returns how many were freed. Like the reference, it leaves `active` alone: a slot with
/// `pid == 0` is not live whatever `active` says.
pub fn prune_dead(view: &RingView, is_alive: impl Fn(u32) -> bool) -> u32 {
    prune_dead_by(view, |pid, _| is_alive(pid), |_| {})
}

/// [`prune_dead`], calling `on_freed(pid)` for each slot it freed: a CAS that fails (another
/// pruner freed the slot, or a new reader took it meanwhile) frees nothing and is not
/// reported.
pub fn prune_dead_with(
    view: &RingView,
    is_alive: impl Fn(u32) -> bool,
    on_freed: impl FnMut(u32),
) -> u32 {
    prune_dead_by(view, |pid, _| is_alive(pid), on_freed)
}

/// [`prune_dead_with`], judging each slot by `is_alive(pid, token)`, its pid and the token
/// in its `heartbeat_tsc` (see [`token_incarnation`]).
///
/// A slot judged dead has its token cleared by CAS (`token → 0`) before the CAS that frees
/// its pid, and is left alone when the token changed meanwhile: a reader with the same pid
/// (a later process that got it) may have cleared the token to claim the slot, and the CAS
/// on the pid, which cannot tell two processes with one pid apart, would free that
/// reader's fresh registration. Once we cleared the token nobody else claims the slot under
/// that pid (a check that reads 0 judges by the pid alone, and the pid is alive: that is
/// why the token was needed), so the CAS on the pid frees the registration we judged. A
/// slot whose pid changed around the load of its token is left alone, as in
/// [`register_owner_as`].
pub fn prune_dead_by(
    view: &RingView,
    is_alive: impl Fn(u32, u64) -> bool,
    mut on_freed: impl FnMut(u32),
) -> u32 {
    let mut freed = 0;
    let count = check_registry(view).unwrap_or(0);
    for i in 0..count {
        let (Some(pid_w), Some(token_w)) = (
            view.registry_a32(i, reg::PID),
            view.registry_a64(i, reg::HEARTBEAT_TSC),
        ) else {
            break;
        };
        // Acquire: the token loaded next is at least as new as the one a claimant cleared
        // before storing this pid. The CASes below decide; these loads pick a candidate.
        let pid = pid_w.load(Ordering::Acquire);
        if pid == 0 {
            continue;
        }
        // Acquire: pairs with the registrant's release store of its token.
        let token = token_w.load(Ordering::Acquire);
        // Acquire: a slot claimed since the pid was loaded shows the claim here (the token
        // may be the claimant's, stored after its claim): not ours to judge, nor to free.
        if pid_w.load(Ordering::Acquire) != pid {
            continue;
        }
        if is_alive(pid, token) {
            continue;
        }
        // AcqRel: orders the clear before the CAS on the pid for whoever acquires either.
        if token != 0
            && token_w
                .compare_exchange(token, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            continue;
        }
        // AcqRel: as in register; fails harmlessly if another pruner or a new reader won.
        if pid_w
            .compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            freed += 1;
            on_freed(pid);
        }
    }
    freed
}

/// How far a lossless producer at `seq` may go (spec §6): it may write sequence `s` while
/// `s < gate_limit`. With `window = max(C/2, 1)` the limit is `min(min_cursor + C, seq +
/// window)` over the live readers, or `seq + window` when none is registered.
#[must_use]
pub fn gate_limit(view: &RingView, seq: u64) -> u64 {
    let cap = view.capacity();
    let ahead = seq.saturating_add((cap / 2).max(1));
    match min_live_cursor(view) {
        Some(min) => min.saturating_add(cap).min(ahead),
        None => ahead,
    }
}

/// Messages up to `write_seq` that the slowest live reader has not read yet:
/// `write_seq - (min_cursor - 1)`, 0 for a reader at or past `write_seq + 1`, and `None`
/// when no reader is registered (or the ring has no registry). On a lossy ring a lapped
/// reader that has not polled since may show more than the capacity.
#[must_use]
pub fn slowest_unread(view: &RingView, write_seq: u64) -> Option<u64> {
    min_live_cursor(view).map(|min| unread(write_seq, min))
}

/// Messages up to `write_seq` that a reader whose next sequence is `cursor` has not read:
/// `write_seq - (cursor - 1)`, saturating (a cursor of 0 counts as 1; one past `write_seq`
/// or further is caught up).
#[must_use]
pub const fn unread(write_seq: u64, cursor: u64) -> u64 {
    write_seq.saturating_sub(cursor.saturating_sub(1))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layout::Geometry;
    use crate::region::Region;
    use crate::testutil::Word;
    use std::vec;
    use std::vec::Vec;

    fn ring(buf: &mut Vec<Word>, geo: &Geometry) -> RingView {
        buf.resize(geo.total_len().unwrap().div_ceil(8) as usize, Word(0));
        // SAFETY: the buffer outlives the view in each test and is only used through it.
        let region =
            unsafe { Region::from_raw_parts(buf.as_mut_ptr().cast(), buf.len() * 8) }.unwrap();
        // SAFETY: the buffer was just sized for this ring and each test makes one ring per
        // buffer: no other view of it exists yet.
        unsafe { RingView::init(region, geo) }.unwrap()
    }

    fn lossless(readers: u32) -> Geometry {
        Geometry::spmc(8, 16, 8, readers, true).unwrap()
    }

    #[test]
    fn unread_counts_from_the_cursor_and_saturates() {
        assert_eq!(unread(10, 4), 7); // 4..=10
        assert_eq!(unread(10, 11), 0); // caught up
        assert_eq!(unread(10, 30), 0); // ahead: never wraps
        assert_eq!(unread(10, 0), 10); // cursor 0 taken as 1
        assert_eq!(unread(0, 1), 0);
    }

    #[test]
    fn register_fills_the_slot_and_publishes_active_last() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(2));
        let slot = register(&v, 42, "reader-a", 7, |_| true).unwrap();
        assert_eq!(slot, 0);
        let r = live_reader(&v, 0).unwrap();
        assert_eq!((r.slot, r.pid, r.cursor), (0, 42, 7));
        assert_eq!(name_bytes(&v.registry_name(0).unwrap()), b"reader-a");
        // Raw bytes of the slot at registry offset 128: pid, active, cursor, heartbeat (in
        // the host's byte order: ring memory is native).
        let bytes: &[u8] = zerocopy::IntoBytes::as_bytes(&buf[16..24]);
        assert_eq!(&bytes[0..4], &42u32.to_ne_bytes());
        assert_eq!(&bytes[4..8], &1u32.to_ne_bytes());
        assert_eq!(&bytes[8..16], &7u64.to_ne_bytes());
        // heartbeat_tsc: the registration's token (beyond the reference's 0), never 0.
        assert_ne!(&bytes[16..24], &[0; 8]);
        assert_eq!(&bytes[24..32], b"reader-a");
        assert!(bytes[32..64].iter().all(|&b| b == 0));
        assert_eq!(register(&v, 43, "b", 9, |_| true), Ok(1));
        // Each registration gets its own token.
        let a = register_owner(&v, 44, &encode_name("c"), 1, |pid| pid != 42).unwrap();
        let b = register_owner(&v, 44, &encode_name("c"), 1, |pid| pid != 43).unwrap();
        assert_eq!((a.slot, b.slot), (0, 1));
        assert_ne!(a.token, b.token);
    }

    #[test]
    fn tokens_carry_the_incarnation_for_their_pid_only() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(4));
        let inc = Incarnation::new(123_456_789, 0xF000_0ABC);
        assert_eq!(
            inc,
            Incarnation {
                start: 123_456_789 & 0xF_FFFF,
                pid_ns: 0xABC
            }
        );
        let o = register_owner_as(&v, 42, &encode_name("a"), 1, Some(inc), |_, _| true).unwrap();
        assert_eq!(token_incarnation(42, o.token), Some(inc));
        // The check ties the token to its pid: read with another pid it carries nothing.
        let others = (1..=1000u32).filter(|&p| p != 42);
        let taken = others
            .filter(|&p| token_incarnation(p, o.token).is_some())
            .count();
        assert!(
            taken < 20,
            "{taken} of 999 other pids take the token for theirs"
        );
        // Untagged tokens (ours without an incarnation, ringfire's 0) carry none.
        let plain = register_owner(&v, 42, &encode_name("b"), 1, |_| true).unwrap();
        assert_eq!(token_incarnation(42, plain.token), None);
        assert_eq!(token_incarnation(42, 0), None);
        // Nor do earlier releases' tokens: a counter XOR a user-space address turned by 32.
        // (Under Miri 60 counters here and 30 rounds below, not 1,000 and 500: those took
        // half a minute there.)
        let counters = if cfg!(miri) { 60 } else { 1000 };
        for addr in [
            0x5555_5555_8010u64,
            0x7FFF_F7FD_3008,
            0x0804_A010,
            0xFFFF_8000_1000,
        ] {
            for n in (1..=counters).chain([1 << 27, (1 << 28) - 1]) {
                let old = n ^ addr.rotate_left(32);
                for pid in [1, 42, 4242, 1 << 22] {
                    assert_eq!(token_incarnation(pid, old), None, "{old:#x}");
                }
            }
        }
        // Never 0 and never the same twice, tagged or not.
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..counters / 2 {
            for t in [new_token(42, Some(inc)), new_token(42, None)] {
                assert_ne!(t, 0);
                assert!(seen.insert(t), "{t:#x} twice");
            }
        }
    }

    #[test]
    fn a_start_time_matches_within_a_tick_across_the_wrap() {
        let inc = Incarnation::new(1000, 0);
        for (start, same) in [(1000, true), (999, true), (1001, true), (998, false)] {
            assert_eq!(inc.may_have_started_at(start), same, "{start}");
        }
        // Cut to 20 bits on both sides.
        assert!(inc.may_have_started_at(1000 + (1 << 20)));
        assert!(!inc.may_have_started_at(1002 + (5 << 20)));
        let edge = Incarnation::new((1 << 20) - 1, 0);
        assert!(edge.may_have_started_at(1 << 20));
        assert!(edge.may_have_started_at((1 << 21) - 2));
        assert!(!edge.may_have_started_at(1 + (1 << 20)));
    }

    /// A dead registration's token is cleared before its pid is freed or claimed, by a
    /// pruner, a registrant and an unregistering owner alike; a pruner whose token changed
    /// under its judgement frees nothing.
    #[test]
    fn pruners_and_claimants_clear_the_token_before_the_pid() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(2));
        let token = |i| {
            v.registry_a64(i, reg::HEARTBEAT_TSC)
                .unwrap()
                .load(Ordering::Relaxed)
        };
        let pid = |i| v.registry_a32(i, reg::PID).unwrap().load(Ordering::Relaxed);
        let old = Incarnation::new(1, 5);
        let new = Incarnation::new(2, 5);
        let by_start = |p: u32, t: u64| token_incarnation(p, t).is_none_or(|i| i.start == 2);
        let a = register_owner_as(&v, 7, &encode_name("a"), 1, Some(old), |_, _| true).unwrap();
        // The process now at pid 7 takes the old registration's slot over.
        let b = register_owner_as(&v, 7, &encode_name("b"), 3, Some(new), by_start).unwrap();
        assert_eq!((a.slot, b.slot), (0, 0));
        assert_eq!((pid(0), token(0)), (7, b.token));
        assert_eq!(
            publish_cursor_as(&v, a, 9),
            Err(RegistryError::NotOwner {
                slot: 0,
                pid: 7,
                found: 7
            })
        );
        // A pruner whose slot got a new token while it judged the old one leaves it alone.
        let c = register_owner_as(&v, 8, &encode_name("c"), 1, Some(old), |_, _| true).unwrap();
        assert_eq!(c.slot, 1);
        let newer = new_token(8, Some(new));
        let freed = prune_dead_by(
            &v,
            |p, t| {
                if p == 8 {
                    v.registry_a64(1, reg::HEARTBEAT_TSC)
                        .unwrap()
                        .store(newer, Ordering::Relaxed);
                }
                by_start(p, t)
            },
            |_| {},
        );
        assert_eq!((freed, pid(1), token(1)), (0, 8, newer));
        // Judged dead with its token in place: token cleared, then pid.
        v.registry_a64(1, reg::HEARTBEAT_TSC)
            .unwrap()
            .store(c.token, Ordering::Relaxed);
        assert_eq!(prune_dead_by(&v, by_start, |p| assert_eq!(p, 8)), 1);
        assert_eq!((pid(1), token(1)), (0, 0));
        // An owner that leaves clears its token too (ringfire's 0 is what is left).
        unregister_owner(&v, b).unwrap();
        assert_eq!((pid(0), token(0)), (0, 0));
        assert_eq!(
            unregister_owner(&v, b),
            Err(RegistryError::NotOwner {
                slot: 0,
                pid: 7,
                found: 0
            })
        );
    }

    #[test]
    fn full_registry_is_an_error_naming_the_count() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(2));
        register(&v, 1, "a", 1, |_| true).unwrap();
        register(&v, 2, "b", 1, |_| true).unwrap();
        let e = register(&v, 3, "c", 1, |_| true).unwrap_err();
        assert_eq!(e, RegistryError::Full { count: 2 });
        assert_eq!(
            std::format!("{e}"),
            "all 2 reader registry slots hold live readers"
        );
        // A corrupt count of 0 (a lossless ring read with its count zeroed) blames no live
        // readers: it said "all 0 reader registry slots hold live readers".
        assert_eq!(
            std::format!("{}", RegistryError::Full { count: 0 }),
            "the reader registry has 0 slots (its header's count is 0)"
        );
    }

    #[test]
    fn no_registry_and_zero_pid_are_errors() {
        let mut buf = vec![];
        let v = ring(&mut buf, &Geometry::spmc(8, 16, 8, 0, false).unwrap());
        assert_eq!(
            register(&v, 1, "a", 1, |_| true),
            Err(RegistryError::NoRegistry)
        );
        assert_eq!(publish_cursor(&v, 0, 3), Err(RegistryError::NoRegistry));
        assert_eq!(min_live_cursor(&v), None);
        assert_eq!(live_readers(&v).count(), 0);
        assert_eq!(prune_dead(&v, |_| false), 0);
        let mut buf2 = vec![];
        let v2 = ring(&mut buf2, &lossless(1));
        assert_eq!(
            register(&v2, 0, "a", 1, |_| true),
            Err(RegistryError::ZeroPid)
        );
        assert_eq!(
            publish_cursor(&v2, 1, 3),
            Err(RegistryError::BadSlot { slot: 1, count: 1 })
        );
    }

    #[test]
    fn a_dead_readers_slot_is_reused() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(2));
        register(&v, 10, "old", 3, |_| true).unwrap();
        register(&v, 11, "live", 4, |_| true).unwrap();
        // pid 10 died: the next reader takes slot 0 over, with its own cursor and name.
        let slot = register(&v, 12, "new", 20, |p| p != 10).unwrap();
        assert_eq!(slot, 0);
        let r = live_reader(&v, 0).unwrap();
        assert_eq!((r.pid, r.cursor), (12, 20));
        assert_eq!(name_bytes(&v.registry_name(0).unwrap()), b"new");
        // The dead owner can no longer unregister (and clobber) the slot.
        assert_eq!(
            unregister(&v, 0, 10),
            Err(RegistryError::NotOwner {
                slot: 0,
                pid: 10,
                found: 12
            })
        );
        assert_eq!(live_reader(&v, 0).map(|r| r.pid), Some(12));
    }

    #[test]
    fn unregister_frees_the_pid_and_only_the_pid() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(2));
        let s = register(&v, 5, "a", 1, |_| true).unwrap();
        publish_cursor(&v, s, 6).unwrap();
        assert_eq!(min_live_cursor(&v), Some(6));
        unregister(&v, s, 5).unwrap();
        assert_eq!(
            v.registry_a32(s, reg::PID).unwrap().load(Ordering::Relaxed),
            0
        );
        // `active` is left as a prune leaves it: the slot is no longer live (pid 0).
        assert_eq!(
            v.registry_a32(s, reg::ACTIVE)
                .unwrap()
                .load(Ordering::Relaxed),
            1
        );
        assert_eq!(live_reader(&v, s), None);
        assert_eq!(min_live_cursor(&v), None);
        assert!(matches!(
            unregister(&v, s, 5),
            Err(RegistryError::NotOwner { found: 0, .. })
        ));
        assert_eq!(
            unregister(&v, 1, 0),
            Err(RegistryError::NotOwner {
                slot: 1,
                pid: 0,
                found: 0
            })
        );
        assert_eq!(
            unregister(&v, 2, 5),
            Err(RegistryError::BadSlot { slot: 2, count: 2 })
        );
        // The freed slot is taken again from index 0, and is live once registered.
        assert_eq!(register(&v, 6, "b", 9, |_| true), Ok(0));
        assert_eq!(live_reader(&v, 0).map(|r| (r.pid, r.cursor)), Some((6, 9)));
    }

    #[test]
    fn prune_frees_only_dead_pids_and_leaves_active() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(3));
        register(&v, 100, "a", 5, |_| true).unwrap();
        register(&v, 200, "b", 2, |_| true).unwrap();
        register(&v, 300, "c", 9, |_| true).unwrap();
        assert_eq!(min_live_cursor(&v), Some(2));
        assert_eq!(prune_dead(&v, |p| p != 200 && p != 300), 2);
        assert_eq!(prune_dead(&v, |p| p != 200 && p != 300), 0);
        let pids: Vec<u32> = (0..3)
            .map(|i| v.registry_a32(i, reg::PID).unwrap().load(Ordering::Relaxed))
            .collect();
        assert_eq!(pids, [100, 0, 0]);
        // active stays 1 (as in the reference), yet the slots no longer count as live.
        assert_eq!(
            v.registry_a32(1, reg::ACTIVE)
                .unwrap()
                .load(Ordering::Relaxed),
            1
        );
        let live: Vec<LiveReader> = live_readers(&v).collect();
        assert_eq!(
            live,
            [LiveReader {
                slot: 0,
                pid: 100,
                cursor: 5
            }]
        );
    }

    #[test]
    fn names_are_cut_at_31_bytes_and_nul_padded() {
        let long = "abcdefghijklmnopqrstuvwxyz0123456789";
        let e = encode_name(long);
        assert_eq!(&e[..31], &long.as_bytes()[..31]);
        assert_eq!(e[31], 0);
        // Cut by bytes: a two-byte character straddling byte 31 is split, as in the reference.
        let s = "é".repeat(16); // 32 bytes
        let e = encode_name(&s);
        assert_eq!(&e[..31], &s.as_bytes()[..31]);
        assert_eq!((e[30], e[31]), (0xC3, 0));
        assert_eq!(name_bytes(&encode_name("")), b"");
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(1));
        register(&v, 9, long, 1, |_| true).unwrap();
        assert_eq!(
            name_bytes(&v.registry_name(0).unwrap()),
            &long.as_bytes()[..31]
        );
    }

    #[test]
    fn gate_values_follow_section_6() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(2)); // C = 8, window 4
        assert_eq!(gate_limit(&v, 10), 14);
        let a = register(&v, 1, "a", 5, |_| true).unwrap();
        assert_eq!(gate_limit(&v, 10), 13); // min(5 + 8, 14)
        assert_eq!(gate_limit(&v, 1), 5); // min(13, 1 + 4)
        let b = register(&v, 2, "b", 3, |_| true).unwrap();
        assert_eq!(gate_limit(&v, 10), 11); // min(3 + 8, 14)
        publish_cursor(&v, b, 9).unwrap();
        assert_eq!(gate_limit(&v, 10), 13); // a at 5 is now the slowest
        unregister(&v, a, 1).unwrap();
        assert_eq!(gate_limit(&v, 10), 14); // b at 9: min(17, 14)
        assert_eq!(gate_limit(&v, 16), 17); // b at 9: min(17, 20)
        publish_cursor(&v, b, u64::MAX - 3).unwrap();
        assert_eq!(gate_limit(&v, u64::MAX - 1), u64::MAX); // saturates, never wraps
        unregister(&v, b, 2).unwrap();
        assert_eq!(gate_limit(&v, 16), 20);
        let mut buf1 = vec![];
        let v1 = ring(&mut buf1, &Geometry::spmc(1, 16, 8, 1, true).unwrap());
        assert_eq!(gate_limit(&v1, 7), 8); // window is at least 1
    }

    #[test]
    fn slowest_unread_counts_from_the_smallest_live_cursor() {
        let mut buf = vec![];
        let v = ring(&mut buf, &lossless(2));
        assert_eq!(slowest_unread(&v, 10), None);
        let a = register(&v, 1, "a", 4, |_| true).unwrap();
        assert_eq!(slowest_unread(&v, 10), Some(7)); // 4..=10 unread
        let b = register(&v, 2, "b", 11, |_| true).unwrap();
        assert_eq!(slowest_unread(&v, 10), Some(7)); // a is still the slowest
        unregister(&v, a, 1).unwrap();
        assert_eq!(slowest_unread(&v, 10), Some(0)); // b has read everything
        publish_cursor(&v, b, 30).unwrap();
        assert_eq!(slowest_unread(&v, 10), Some(0)); // ahead of write_seq: never wraps
        publish_cursor(&v, b, 0).unwrap();
        assert_eq!(slowest_unread(&v, 10), Some(10)); // a corrupt cursor 0 is taken as 1
        let mut buf0 = vec![];
        let v0 = ring(&mut buf0, &Geometry::spmc(8, 16, 8, 0, false).unwrap());
        assert_eq!(slowest_unread(&v0, 10), None); // no registry
    }
}
