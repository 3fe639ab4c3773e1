//! [`RingMultiplexer<T>`]: one reader over many typed rings, and (feature `tokio`)
//! `AsyncRingMultiplexer<T>`, the same for async code with `recv_any().await`
//! (ringfire's `multiplexer` module, same names and results).
//!
//! A multiplexer owns consumers of rings that carry the same record type, say one ring per
//! order book, and lets a single thread or task read all of them. Channels are numbered
//! from 0 in the order they were added and keep their number for the life of the
//! multiplexer (there is no removal); every receive says which channel the record came
//! from. Each channel also has a name: the one given to `add_named`/`attach_named`, or
//! `channel_<index>`.
//!
//! # Fairness
//!
//! [`RingMultiplexer::try_recv_any`] serves the channels in turn. It remembers the channel
//! after the last one that delivered a record and starts looking there, so while several
//! channels have records each of them gets one per turn, however long the others'
//! backlogs are: with backlogs of 3, 1 and 2 records on channels 0, 1 and 2, successive
//! calls return channels `0, 1, 2, 0, 2, 0`. That next channel is worked out modulo the
//! number of channels *at the time of the receive*: after channel `n - 1` delivered, the
//! next turn starts at channel 0 even if channels were added since (as ringfire does).
//! [`RingMultiplexer::try_recv_priority`] instead always looks from channel 0 up, so a
//! lower index has strict priority (and can starve the others); it neither uses nor moves
//! the turn. Each channel's own records always come in ring order.
//!
//! Overwritten records are skipped as [`RingConsumer::try_recv`] skips them, and counted
//! in that channel's [`RingConsumer::lapped_count`] (through
//! [`RingMultiplexer::consumer`]); the multiplexer itself reports no loss.
//!
//! A channel reads the ring it attached to. When the file at its path is removed or
//! replaced (a restarted producer), the channel still delivers the old ring's records and
//! never the new ring's, as in ringfire ([`RingConsumer::is_replaced`] tells); a consumer
//! attached to the new ring, put in through [`RingMultiplexer::consumer_mut`], reads it
//! under the same index, name and turn.
//!
//! `AsyncRingMultiplexer` (feature `tokio`) serves in the same order; its docs say how
//! `recv_any` waits, and what that costs.

use std::fmt;
use std::path::Path;

use zerocopy::FromBytes;

use crate::consumer::RingConsumer;
use crate::error::Result;

#[cfg(feature = "tokio")]
use crate::async_consumer::AsyncRingConsumer;

/// One channel: a consumer and its name.
struct Channel<C> {
    name: String,
    consumer: C,
}

/// The channels of a multiplexer (sync or async) and whose turn is next.
struct Channels<C> {
    list: Vec<Channel<C>>,
    /// Where the next round-robin pass starts: the channel after the last one that
    /// delivered, modulo the channel count then. Always `< list.len()` once a channel exists.
    next: usize,
}

impl<C> Channels<C> {
    const fn new() -> Self {
        Channels {
            list: Vec::new(),
            next: 0,
        }
    }

    /// Adds `consumer` under `name` (`channel_<index>` when `None`); returns its index.
    fn add(&mut self, name: Option<String>, consumer: C) -> usize {
        let idx = self.list.len();
        let name = name.unwrap_or_else(|| format!("channel_{idx}"));
        self.list.push(Channel { name, consumer });
        idx
    }

    fn name(&self, idx: usize) -> Option<&str> {
        self.list.get(idx).map(|c| c.name.as_str())
    }

    fn get(&self, idx: usize) -> Option<&C> {
        self.list.get(idx).map(|c| &c.consumer)
    }

    fn get_mut(&mut self, idx: usize) -> Option<&mut C> {
        self.list.get_mut(idx).map(|c| &mut c.consumer)
    }

    /// Offers each channel to `take`, starting at `next` and wrapping around, until one
    /// gives a value; the turn then passes to the channel after it.
    fn round_robin<R>(&mut self, mut take: impl FnMut(&mut C) -> Option<R>) -> Option<(usize, R)> {
        let n = self.list.len();
        let start = self.next;
        debug_assert!(start < n || n == 0);
        let (idx, v) = (start..n)
            .chain(0..start)
            .find_map(|i| take(&mut self.list[i].consumer).map(|v| (i, v)))?;
        self.next = (idx + 1) % n;
        Some((idx, v))
    }

    /// Offers each channel to `take` from channel 0 up until one gives a value; the turn
    /// is left as it is.
    fn by_priority<R>(&mut self, mut take: impl FnMut(&mut C) -> Option<R>) -> Option<(usize, R)> {
        self.list
            .iter_mut()
            .enumerate()
            .find_map(|(i, c)| take(&mut c.consumer).map(|v| (i, v)))
    }

    /// Up to `max` values of successive round-robin passes.
    fn batch<R>(
        &mut self,
        max: usize,
        mut take: impl FnMut(&mut C) -> Option<R>,
    ) -> Vec<(usize, R)> {
        // Capped: a large `max` on quiet rings should not allocate for records never read.
        let mut out = Vec::with_capacity(max.min(64));
        while out.len() < max {
            match self.round_robin(&mut take) {
                Some(item) => out.push(item),
                None => break,
            }
        }
        out
    }
}

impl<C: fmt::Debug> fmt::Debug for Channels<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channels")
            .field(
                "channels",
                &self
                    .list
                    .iter()
                    .map(|c| (&c.name, &c.consumer))
                    .collect::<Vec<_>>(),
            )
            .field("next", &self.next)
            .finish()
    }
}

/// One reader over many [`RingConsumer<T>`]s: round-robin or priority receive across
/// them, by channel index. See the [module docs](self) for the order of service.
///
/// ```
/// use ringwire::{RingMultiplexer, RingProducer};
///
/// # fn main() -> ringwire::Result<()> {
/// let dir = std::env::temp_dir();
/// let a = dir.join(format!("mux-doc-a-{}", std::process::id()));
/// let b = dir.join(format!("mux-doc-b-{}", std::process::id()));
/// let mut book_a = RingProducer::<u64>::create(&a, 64)?;
/// let mut book_b = RingProducer::<u64>::create(&b, 64)?;
/// book_a.push_batch(&[1, 2, 3]);
/// book_b.push(&10);
///
/// let mut mux = RingMultiplexer::<u64>::new();
/// assert_eq!(mux.attach_named("book-a", &a)?, 0);
/// assert_eq!(mux.attach(&b)?, 1);
/// assert_eq!(mux.channel_name(1), Some("channel_1"));
/// // In turn: one record per channel while both have some.
/// assert_eq!(mux.recv_batch_any(10), [(0, 1), (1, 10), (0, 2), (0, 3)]);
/// assert_eq!(mux.try_recv_any(), None);
/// # std::fs::remove_file(&a).ok();
/// # std::fs::remove_file(&b).ok();
/// # Ok(())
/// # }
/// ```
pub struct RingMultiplexer<T> {
    channels: Channels<RingConsumer<T>>,
}

impl<T: FromBytes + 'static> Default for RingMultiplexer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: FromBytes + 'static> RingMultiplexer<T> {
    /// A multiplexer with no channels: every receive finds nothing until one is added.
    pub const fn new() -> Self {
        RingMultiplexer {
            channels: Channels::new(),
        }
    }

    /// Adds `consumer` as the next channel, named `channel_<index>`; returns its index
    /// (0 for the first channel, then 1, 2, …). The consumer keeps its cursor.
    pub fn add(&mut self, consumer: RingConsumer<T>) -> usize {
        self.channels.add(None, consumer)
    }

    /// Adds `consumer` as the next channel under `name` (names need not be unique);
    /// returns its index.
    pub fn add_named<S: Into<String>>(&mut self, name: S, consumer: RingConsumer<T>) -> usize {
        self.channels.add(Some(name.into()), consumer)
    }

    /// Attaches to the ring at `path` as [`RingConsumer::attach`] does (from the oldest
    /// retained record) and adds it as the next channel; returns its index. On error
    /// (a missing file, a ring of another record type, …) nothing is added.
    pub fn attach<P: AsRef<Path>>(&mut self, path: P) -> Result<usize> {
        Ok(self.add(RingConsumer::attach(path)?))
    }

    /// [`RingMultiplexer::attach`] with the channel named `name`. Note the order of the
    /// arguments: name first, then path (as ringfire has it).
    pub fn attach_named<P: AsRef<Path>, S: Into<String>>(
        &mut self,
        name: S,
        path: P,
    ) -> Result<usize> {
        Ok(self.add_named(name, RingConsumer::attach(path)?))
    }

    /// Number of channels.
    pub fn len(&self) -> usize {
        self.channels.list.len()
    }

    /// Whether no channel has been added.
    pub fn is_empty(&self) -> bool {
        self.channels.list.is_empty()
    }

    /// The name of channel `idx`, or `None` when there is no such channel.
    pub fn channel_name(&self, idx: usize) -> Option<&str> {
        self.channels.name(idx)
    }

    /// Channel `idx`'s consumer (for its `lapped_count`, `lag`, `cursor`, …), or `None`
    /// when there is no such channel.
    pub fn consumer(&self, idx: usize) -> Option<&RingConsumer<T>> {
        self.channels.get(idx)
    }

    /// Channel `idx`'s consumer, mutably (to `seek`, `commit_offset`, …), or `None`
    /// when there is no such channel. A record taken through it directly does not move
    /// the round-robin turn.
    pub fn consumer_mut(&mut self, idx: usize) -> Option<&mut RingConsumer<T>> {
        self.channels.get_mut(idx)
    }

    /// The next record of the first channel that has one, looking in turn from the channel
    /// after the one that last delivered (see the [module docs](self)), with its channel
    /// index; `None` when every channel is empty, or there are none.
    #[inline]
    pub fn try_recv_any(&mut self) -> Option<(usize, T)> {
        self.channels.round_robin(RingConsumer::try_recv)
    }

    /// The next record of the lowest-numbered channel that has one, with its index;
    /// `None` when every channel is empty. Channel 0 is drained before channel 1 gets
    /// anything, and so on. Does not move the round-robin turn of
    /// [`RingMultiplexer::try_recv_any`].
    #[inline]
    pub fn try_recv_priority(&mut self) -> Option<(usize, T)> {
        self.channels.by_priority(RingConsumer::try_recv)
    }

    /// Up to `max_items` records, each with its channel index, in the order successive
    /// [`RingMultiplexer::try_recv_any`] calls would return them: one record per
    /// non-empty channel per turn, so the backlogs interleave. Stops early when every
    /// channel is empty; empty when `max_items` is 0 or nothing is there.
    pub fn recv_batch_any(&mut self, max_items: usize) -> Vec<(usize, T)> {
        self.channels.batch(max_items, RingConsumer::try_recv)
    }
}

impl<T: FromBytes + 'static> fmt::Debug for RingMultiplexer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingMultiplexer")
            .field("channels", &self.channels)
            .finish()
    }
}

/// One async reader over many [`AsyncRingConsumer<T>`]s (feature `tokio`):
/// [`AsyncRingMultiplexer::recv_any`] waits for a record on any of them, served in turn as
/// [`RingMultiplexer::try_recv_any`] does (see the [module docs](self)).
///
/// # How it waits
///
/// Each [`AsyncRingConsumer`] has its own waiter thread that sleeps on its ring's futex
/// once armed (see [`async_consumer`](crate::async_consumer)). A poll of
/// [`AsyncRingMultiplexer::recv_any`] first tries every channel in turn, arming nothing.
/// Only when all are empty does it poll each channel's
/// [`AsyncRingConsumer::poll_recv`] with the task's context, in the same order: each poll
/// stores the task's waker with that channel's waiter, arms it and tries its ring once
/// more, and the first record found there is returned. The task is left `Pending` only
/// when every channel's waiter is armed (or, for a channel set up with `with_yields` or
/// without a waiter thread, has asked for the task to be polled again), so a record
/// published on any channel after its poll wakes the task, and one published before it is
/// caught by that poll's second try: no wake-up is lost. A record is taken from a ring only
/// inside a poll that returns it, so dropping a pending `recv_any` loses nothing.
///
/// Under tokio each record `recv_any` returns spends one unit of the task's cooperative
/// budget, whichever channel it came from, and a poll with the budget spent returns
/// `Pending` before trying any channel, as [`AsyncRingConsumer`]'s receives do (see
/// [sharing the executor](crate::async_consumer#sharing-the-executor)): a task looping on
/// busy channels yields to the runtime's other tasks now and then.
///
/// The cost: an idle awaiting multiplexer of `n` channels has `n` waiter threads asleep on
/// their rings' futexes, each waking once per futex timeout (50 ms by default, see
/// [`AsyncRingConsumer::with_idle_sleep`]) to re-check its ring, about `20 n` wake-ups a
/// second; the threads exist anyway, one per [`AsyncRingConsumer`]. While records keep
/// coming, polls find them in the first pass and arm nothing. A waiter armed by a pass
/// that then returned a record from another channel stays armed until its own ring
/// publishes, and then wakes the task once for nothing (a spurious wake, which wakers
/// allow; the next poll re-arms or returns a record). ringfire's version instead re-polls
/// every channel over and over, spinning, yielding and sleeping 10 µs on a tokio timer.
#[cfg(feature = "tokio")]
pub struct AsyncRingMultiplexer<T> {
    channels: Channels<AsyncRingConsumer<T>>,
}

#[cfg(feature = "tokio")]
impl<T: FromBytes + 'static> Default for AsyncRingMultiplexer<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "tokio")]
impl<T: FromBytes + 'static> AsyncRingMultiplexer<T> {
    /// A multiplexer with no channels (on which [`AsyncRingMultiplexer::recv_any`] never
    /// completes).
    pub const fn new() -> Self {
        AsyncRingMultiplexer {
            channels: Channels::new(),
        }
    }

    /// Adds `consumer` as the next channel, named `channel_<index>`; returns its index.
    /// Its tuning (`with_spins`, `with_yields`, `with_idle_sleep`) applies when
    /// [`AsyncRingMultiplexer::recv_any`] arms it.
    pub fn add(&mut self, consumer: AsyncRingConsumer<T>) -> usize {
        self.channels.add(None, consumer)
    }

    /// Adds `consumer` as the next channel under `name`; returns its index.
    pub fn add_named<S: Into<String>>(&mut self, name: S, consumer: AsyncRingConsumer<T>) -> usize {
        self.channels.add(Some(name.into()), consumer)
    }

    /// Attaches to the ring at `path` as [`AsyncRingConsumer::attach`] does (from the
    /// oldest retained record, with its own waiter thread) and adds it as the next channel;
    /// returns its index. On error nothing is added.
    pub fn attach<P: AsRef<Path>>(&mut self, path: P) -> Result<usize> {
        Ok(self.add(AsyncRingConsumer::attach(path)?))
    }

    /// [`AsyncRingMultiplexer::attach`] with the channel named `name` (name first, then
    /// path).
    pub fn attach_named<P: AsRef<Path>, S: Into<String>>(
        &mut self,
        name: S,
        path: P,
    ) -> Result<usize> {
        Ok(self.add_named(name, AsyncRingConsumer::attach(path)?))
    }

    /// Number of channels.
    pub fn len(&self) -> usize {
        self.channels.list.len()
    }

    /// Whether no channel has been added.
    pub fn is_empty(&self) -> bool {
        self.channels.list.is_empty()
    }

    /// The name of channel `idx`, or `None` when there is no such channel.
    pub fn channel_name(&self, idx: usize) -> Option<&str> {
        self.channels.name(idx)
    }

    /// Channel `idx`'s consumer, or `None` when there is no such channel (not in
    /// ringfire's async multiplexer; its sync one has it).
    pub fn consumer(&self, idx: usize) -> Option<&AsyncRingConsumer<T>> {
        self.channels.get(idx)
    }

    /// Channel `idx`'s consumer, mutably, or `None` when there is no such channel. Its
    /// [`RingConsumer`] may be replaced through [`AsyncRingConsumer::get_mut`] (a restarted
    /// producer's new ring, say): the next [`AsyncRingMultiplexer::recv_any`] that waits
    /// moves the channel's waiter to it.
    pub fn consumer_mut(&mut self, idx: usize) -> Option<&mut AsyncRingConsumer<T>> {
        self.channels.get_mut(idx)
    }

    /// The next record of the first channel that has one, in turn, with its index, without
    /// waiting: as [`RingMultiplexer::try_recv_any`]. It shares the turn with
    /// [`AsyncRingMultiplexer::recv_any`].
    #[inline]
    pub fn try_recv_any(&mut self) -> Option<(usize, T)> {
        self.channels.round_robin(AsyncRingConsumer::try_recv)
    }

    /// The next record of the lowest-numbered channel that has one, with its index,
    /// without waiting: as [`RingMultiplexer::try_recv_priority`] (not in ringfire's async
    /// multiplexer).
    #[inline]
    pub fn try_recv_priority(&mut self) -> Option<(usize, T)> {
        self.channels.by_priority(AsyncRingConsumer::try_recv)
    }

    /// Up to `max_items` records without waiting, as [`RingMultiplexer::recv_batch_any`]
    /// (not in ringfire's async multiplexer).
    pub fn recv_batch_any(&mut self, max_items: usize) -> Vec<(usize, T)> {
        self.channels.batch(max_items, AsyncRingConsumer::try_recv)
    }

    /// The next record of any channel, with its index, served in turn as
    /// [`AsyncRingMultiplexer::try_recv_any`]; waits, without blocking the executor or
    /// polling, until one is published. Cancel-safe: dropping the future loses no record.
    ///
    /// With no channels it never completes (and uses no CPU); nor does it while no channel
    /// publishes (producers stopped, or replaced by restarted ones): bound the wait
    /// (`tokio::time::timeout`) where that matters.
    pub async fn recv_any(&mut self) -> (usize, T) {
        std::future::poll_fn(|cx| self.poll_recv_any(cx)).await
    }

    /// Polls for the next record of any channel: `Ready` with it and its index, or
    /// `Pending` with `cx`'s waker registered with every channel's waiter (see
    /// [how it waits](AsyncRingMultiplexer#how-it-waits)). With no channels, `Pending`
    /// with nothing registered. Under tokio, also `Pending` (the task to be polled again
    /// once it has yielded) when the task's cooperative budget is spent.
    pub fn poll_recv_any(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<(usize, T)> {
        use std::task::Poll;
        // One unit of the task's budget per record, whichever channel gave it.
        crate::async_consumer::budgeted(cx, |cx| {
            // Records at hand: take one without arming any waiter.
            if let Some(got) = self.try_recv_any() {
                return Poll::Ready(got);
            }
            // All empty: arm every channel (each poll re-checks its ring after arming), in
            // the same turn order; a record that came meanwhile is returned at once.
            match self
                .channels
                .round_robin(|c| match c.poll_recv_unbudgeted(cx) {
                    Poll::Ready(v) => Some(v),
                    Poll::Pending => None,
                }) {
                Some(got) => Poll::Ready(got),
                None => Poll::Pending,
            }
        })
    }
}

#[cfg(feature = "tokio")]
impl<T: FromBytes + 'static> fmt::Debug for AsyncRingMultiplexer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRingMultiplexer")
            .field("channels", &self.channels)
            .finish()
    }
}

#[cfg(all(test, feature = "tokio"))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::RingProducer;

    #[tokio::test(flavor = "current_thread")]
    async fn async_mux_waits_on_a_channel_consumer_swapped_in_through_consumer_mut() {
        let (a, b) = (
            crate::test_tmp::TmpPath::new("mux-swap-a"),
            crate::test_tmp::TmpPath::new("mux-swap-b"),
        );
        let _ta = RingProducer::<u64>::create(&a, 64).unwrap();
        let mut tb = RingProducer::<u64>::create(&b, 64).unwrap();
        let mut mux = AsyncRingMultiplexer::<u64>::new();
        let rx = AsyncRingConsumer::attach(&a)
            .unwrap()
            .with_idle_sleep(Duration::from_secs(60));
        assert_eq!(mux.add(rx), 0);
        // Channel 0's waiter sleeps on ring a, with a timeout beyond the test's bound.
        assert!(
            tokio::time::timeout(Duration::from_millis(20), mux.recv_any())
                .await
                .is_err()
        );
        let old = std::mem::replace(
            mux.consumer_mut(0).unwrap().get_mut(),
            RingConsumer::attach(&b).unwrap(),
        );
        drop(old);
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tb.push(&5);
            tb
        });
        let got = tokio::time::timeout(Duration::from_secs(10), mux.recv_any()).await;
        assert_eq!(got, Ok((0, 5)));
        drop(late.join());
    }
}
