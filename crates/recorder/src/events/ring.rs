//! The pre-roll ring: the last `pre` seconds of every clip channel, kept
//! in RAM as sealed, compressed blocks (one channel per block), so that a
//! clip opened now can start `pre` seconds in the past.
//!
//! A block is sealed when it holds [`BLOCK_BYTES`] or spans [`BLOCK_SPAN`]
//! of log time, and compressed with zstd when that saves a quarter or more
//! (video, already compressed, is kept as it is). Blocks are let go oldest
//! first once they end before the horizon (`now - pre`); a video channel
//! keeps everything from its last key unit at or before the horizon, so a
//! clip's video can start on a keyframe at or before `t - pre`. When the
//! rates seen need more than the memory budget, the oldest block of all
//! goes at once from the channel holding the most, so a flooding channel
//! shortens its own pre-roll and not a quiet one's, and
//! [`RingStats::covered_ns`] says how much pre-roll is really kept.

use std::collections::{BTreeMap, VecDeque};

/// A block is sealed when its records reach this many bytes.
pub(crate) const BLOCK_BYTES: usize = 256 << 10;

/// A block is sealed when its messages span this much log time (ns).
pub(crate) const BLOCK_SPAN: u64 = 500_000_000;

/// zstd level of the blocks: the fastest, the ring is written at the
/// full rate of every clip channel.
const ZSTD_LEVEL: i32 = 1;

/// Bytes of a record's head in a block: log time, publish time, sequence,
/// flags, payload length.
const HEAD: usize = 8 + 8 + 4 + 1 + 4;

/// One message, as the ring and the clips see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RingMessage {
    pub(crate) channel: u16,
    pub(crate) sequence: u32,
    pub(crate) log_time: u64,
    pub(crate) publish_time: u64,
    /// A key unit of a video channel.
    pub(crate) key: bool,
    pub(crate) payload: Vec<u8>,
}

/// A sealed block of one channel.
struct Block {
    start: u64,
    end: u64,
    /// Log times of the key units in it.
    keys: Vec<u64>,
    /// Length of the records before compression.
    raw_len: usize,
    compressed: bool,
    data: Vec<u8>,
}

impl Block {
    fn memory(&self) -> u64 {
        (self.data.capacity() + self.keys.capacity() * 8) as u64
    }
}

/// The blocks of one channel and the one being filled.
#[derive(Default)]
struct ChannelRing {
    sealed: VecDeque<Block>,
    open: Vec<u8>,
    open_start: u64,
    open_end: u64,
    open_keys: Vec<u64>,
    keyed: bool,
    /// Bytes of its sealed blocks.
    sealed_bytes: u64,
}

/// What the status shows of the ring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Bytes held (compressed blocks and the open ones).
    pub held_bytes: u64,
    /// The memory budget.
    pub budget_bytes: u64,
    /// The pre-roll asked for (the longest of the rules'), ns.
    pub pre_ns: u64,
    /// Pre-roll kept now for every channel: from the latest of the
    /// channels' oldest messages to the newest, ns; below `pre_ns` once
    /// the budget made the ring let go early.
    pub covered_ns: u64,
    /// Blocks let go before their time because of the budget.
    pub evicted_early: u64,
}

/// The ring of every clip channel.
pub(crate) struct Ring {
    channels: BTreeMap<u16, ChannelRing>,
    held: u64,
    budget: u64,
    pre_ns: u64,
    newest: u64,
    evicted_early: u64,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl Ring {
    /// A ring that keeps `pre_ns` of log time within `budget` bytes.
    pub(crate) fn new(pre_ns: u64, budget: u64) -> Ring {
        Ring {
            channels: BTreeMap::new(),
            held: 0,
            budget,
            pre_ns,
            newest: 0,
            evicted_early: 0,
            zstd: zstd::bulk::Compressor::new(ZSTD_LEVEL).ok(),
        }
    }

    /// Adds a message; lets go what is past the horizon or over budget.
    pub(crate) fn push(&mut self, m: &RingMessage) {
        let ring = self.channels.entry(m.channel).or_default();
        if ring.open.is_empty() {
            ring.open_start = m.log_time;
            ring.open_end = m.log_time;
        }
        let before = ring.open.capacity();
        ring.open.extend_from_slice(&m.log_time.to_le_bytes());
        ring.open.extend_from_slice(&m.publish_time.to_le_bytes());
        ring.open.extend_from_slice(&m.sequence.to_le_bytes());
        ring.open.push(u8::from(m.key));
        ring.open
            .extend_from_slice(&(m.payload.len() as u32).to_le_bytes());
        ring.open.extend_from_slice(&m.payload);
        ring.open_start = ring.open_start.min(m.log_time);
        ring.open_end = ring.open_end.max(m.log_time);
        if m.key {
            ring.keyed = true;
            ring.open_keys.push(m.log_time);
        }
        self.held += (ring.open.capacity() - before) as u64;
        self.newest = self.newest.max(m.log_time);
        let full = ring.open.len() >= BLOCK_BYTES
            || ring.open_end.saturating_sub(ring.open_start) >= BLOCK_SPAN;
        if full {
            self.seal(m.channel);
        }
        self.evict();
    }

    /// Seals the open block of `channel`.
    fn seal(&mut self, channel: u16) {
        let Some(ring) = self.channels.get_mut(&channel) else {
            return;
        };
        if ring.open.is_empty() {
            return;
        }
        let raw = std::mem::take(&mut ring.open);
        self.held -= raw.capacity() as u64;
        let packed = self
            .zstd
            .as_mut()
            .and_then(|z| z.compress(&raw).ok())
            .filter(|c| c.len() <= raw.len() / 4 * 3);
        let (compressed, mut data) = match packed {
            Some(c) => (true, c),
            None => (false, raw.clone()),
        };
        data.shrink_to_fit();
        let block = Block {
            start: ring.open_start,
            end: ring.open_end,
            keys: std::mem::take(&mut ring.open_keys),
            raw_len: raw.len(),
            compressed,
            data,
        };
        self.held += block.memory();
        ring.sealed_bytes += block.memory();
        ring.sealed.push_back(block);
    }

    /// Lets go of blocks past the horizon, then of the oldest while over
    /// budget.
    fn evict(&mut self) {
        let horizon = self.newest.saturating_sub(self.pre_ns);
        for ring in self.channels.values_mut() {
            // A video channel keeps its last key unit at or before the
            // horizon; none yet means nothing of it can go by time.
            let keep_from = if ring.keyed {
                ring.sealed
                    .iter()
                    .flat_map(|b| b.keys.iter())
                    .chain(ring.open_keys.iter())
                    .copied()
                    .filter(|k| *k <= horizon)
                    .max()
                    .unwrap_or(0)
            } else {
                horizon
            };
            while ring.sealed.front().is_some_and(|b| b.end < keep_from) {
                if let Some(b) = ring.sealed.pop_front() {
                    self.held -= b.memory();
                    ring.sealed_bytes -= b.memory();
                }
            }
        }
        while self.held > self.budget {
            // The oldest block of the channel that holds the most.
            let largest = self
                .channels
                .iter()
                .filter(|(_, r)| !r.sealed.is_empty())
                .max_by_key(|(_, r)| r.sealed_bytes)
                .map(|(ch, _)| *ch);
            let Some(ch) = largest else {
                break;
            };
            if let Some(r) = self.channels.get_mut(&ch) {
                if let Some(b) = r.sealed.pop_front() {
                    self.held -= b.memory();
                    r.sealed_bytes -= b.memory();
                    self.evicted_early += 1;
                }
            }
        }
    }

    /// The log time of `channel`'s last key unit at or before `t`, if the
    /// ring holds one.
    pub(crate) fn key_at_or_before(&self, channel: u16, t: u64) -> Option<u64> {
        let ring = self.channels.get(&channel)?;
        ring.sealed
            .iter()
            .flat_map(|b| b.keys.iter())
            .chain(ring.open_keys.iter())
            .copied()
            .filter(|k| *k <= t)
            .max()
    }

    /// Whether `channel` is video (it has sent a key unit).
    pub(crate) fn is_keyed(&self, channel: u16) -> bool {
        self.channels.get(&channel).is_some_and(|r| r.keyed)
    }

    /// The channels held.
    pub(crate) fn channels(&self) -> impl Iterator<Item = u16> + '_ {
        self.channels.keys().copied()
    }

    /// Every message of `channel` with a log time at or after `from`, in
    /// the order received. A block that does not decode (it cannot: the
    /// ring wrote it) is skipped and counted in the result's second field.
    pub(crate) fn since(&self, channel: u16, from: u64) -> (Vec<RingMessage>, u64) {
        let mut out = Vec::new();
        let mut bad = 0;
        let Some(ring) = self.channels.get(&channel) else {
            return (out, bad);
        };
        for b in ring.sealed.iter().filter(|b| b.end >= from) {
            let raw = if b.compressed {
                match zstd::bulk::decompress(&b.data, b.raw_len) {
                    Ok(raw) => raw,
                    Err(_) => {
                        bad += 1;
                        continue;
                    }
                }
            } else {
                b.data.clone()
            };
            if !records(channel, &raw, from, &mut out) {
                bad += 1;
            }
        }
        if ring.open_end >= from && !records(channel, &ring.open, from, &mut out) {
            bad += 1;
        }
        (out, bad)
    }

    /// The status figures.
    pub(crate) fn stats(&self) -> RingStats {
        // The channel with the shortest pre-roll decides what every clip
        // can count on.
        let oldest = self
            .channels
            .values()
            .filter_map(|r| {
                r.sealed
                    .front()
                    .map(|b| b.start)
                    .or((!r.open.is_empty()).then_some(r.open_start))
            })
            .max();
        RingStats {
            held_bytes: self.held,
            budget_bytes: self.budget,
            pre_ns: self.pre_ns,
            covered_ns: oldest.map_or(0, |o| self.newest.saturating_sub(o).min(self.pre_ns)),
            evicted_early: self.evicted_early,
        }
    }
}

/// Appends the records of `raw` at or after `from` to `out`; false when
/// `raw` ends inside a record.
fn records(channel: u16, raw: &[u8], from: u64, out: &mut Vec<RingMessage>) -> bool {
    let mut at = 0usize;
    while at < raw.len() {
        let Some(head) = raw.get(at..at + HEAD) else {
            return false;
        };
        let u64_at = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().unwrap_or([0; 8]));
        let log_time = u64_at(0);
        let publish_time = u64_at(8);
        let sequence = u32::from_le_bytes(head[16..20].try_into().unwrap_or([0; 4]));
        let key = head[20] != 0;
        let len = u32::from_le_bytes(head[21..25].try_into().unwrap_or([0; 4])) as usize;
        let Some(payload) = raw.get(at + HEAD..at + HEAD + len) else {
            return false;
        };
        if log_time >= from {
            out.push(RingMessage {
                channel,
                sequence,
                log_time,
                publish_time,
                key,
                payload: payload.to_vec(),
            });
        }
        at += HEAD + len;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn msg(channel: u16, sequence: u32, t_ms: u64, key: bool, len: usize) -> RingMessage {
        RingMessage {
            channel,
            sequence,
            log_time: t_ms * MS,
            publish_time: t_ms * MS,
            key,
            payload: vec![(sequence % 251) as u8; len],
        }
    }

    #[test]
    fn keeps_pre_and_lets_older_blocks_go() {
        // 1 kHz for 10 s, pre 2 s.
        let mut ring = Ring::new(2_000 * MS, 1 << 30);
        for i in 0..10_000u32 {
            ring.push(&msg(1, i, u64::from(i), false, 48));
        }
        let (all, bad) = ring.since(1, 0);
        assert_eq!(bad, 0);
        let first = all.first().unwrap().log_time;
        // Everything from the horizon is there, in order, and at most one
        // block (500 ms) more.
        assert!(first <= 7_999 * MS, "{first}");
        assert!(first >= 7_999 * MS - BLOCK_SPAN - MS, "{first}");
        assert!(all.windows(2).all(|w| w[1].sequence == w[0].sequence + 1));
        assert_eq!(all.last().unwrap().sequence, 9_999);
        let (from_horizon, _) = ring.since(1, 8_000 * MS);
        assert_eq!(from_horizon.len(), 2_000);
        assert_eq!(from_horizon[0].payload, vec![(8_000 % 251) as u8; 48]);
        let s = ring.stats();
        assert_eq!(s.covered_ns, 2_000 * MS);
        assert_eq!(s.evicted_early, 0);
    }

    #[test]
    fn video_keeps_the_key_unit_before_the_horizon() {
        // 30 fps, a key unit every 30 frames (1 s), pre 1.5 s.
        let mut ring = Ring::new(1_500 * MS, 1 << 30);
        for i in 0..300u32 {
            let t = u64::from(i) * 1000 / 30;
            ring.push(&msg(2, i, t, i % 30 == 0, 4000));
        }
        let newest = 299 * 1000 / 30;
        let horizon = newest - 1_500;
        let key = ring.key_at_or_before(2, horizon * MS).unwrap();
        assert!(key <= horizon * MS && key + 1_000 * MS > horizon * MS);
        let (from_key, _) = ring.since(2, key);
        assert!(from_key[0].key);
        assert_eq!(from_key[0].log_time, key);
        assert!(ring.is_keyed(2));
    }

    #[test]
    fn over_budget_the_oldest_goes_and_the_shortfall_shows() {
        // 10 s of 4 KiB messages at 1 kHz of random-ish bytes would need
        // far more than 1 MiB: the ring keeps what fits.
        let mut ring = Ring::new(10_000 * MS, 1 << 20);
        let mut x = 0x9e37_79b9_u32;
        for i in 0..10_000u32 {
            let mut m = msg(1, i, u64::from(i), false, 0);
            m.payload = (0..1024)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            ring.push(&m);
        }
        let s = ring.stats();
        assert!(s.held_bytes <= 1 << 20, "{s:?}");
        assert!(s.evicted_early > 0);
        assert!(s.covered_ns < 10_000 * MS && s.covered_ns > 0, "{s:?}");
    }

    #[test]
    fn a_flooding_channel_loses_its_own_pre_roll_not_a_quiet_ones() {
        // 2 s asked, 4 MiB: a 1 kHz channel of 48 B fits many times, a
        // 100 Hz channel of 100 KB random bytes (10 MB/s) does not.
        let mut ring = Ring::new(2_000 * MS, 4 << 20);
        let mut x = 0x9e37_79b9_u32;
        for t in 0..5_000u64 {
            ring.push(&msg(1, t as u32, t, false, 48));
            if t % 10 == 0 {
                let mut m = msg(2, (t / 10) as u32, t, false, 0);
                m.payload = (0..100_000)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x as u8
                    })
                    .collect();
                ring.push(&m);
            }
        }
        let (quiet, _) = ring.since(1, 0);
        assert!(quiet[0].log_time <= 2_999 * MS, "{}", quiet[0].log_time);
        let (flood, _) = ring.since(2, 0);
        assert!(flood[0].log_time > 3_500 * MS, "{}", flood[0].log_time);
        let s = ring.stats();
        assert!(s.held_bytes <= 4 << 20);
        assert!(s.covered_ns < 1_500 * MS, "{s:?}");
    }

    #[test]
    fn a_truncated_block_is_refused_not_read_past() {
        let mut out = Vec::new();
        let mut raw = Vec::new();
        raw.extend_from_slice(&[0u8; HEAD - 4]);
        raw.extend_from_slice(&100u32.to_le_bytes());
        raw.extend_from_slice(&[1, 2, 3]);
        assert!(!records(1, &raw, 0, &mut out));
        assert!(out.is_empty());
    }
}
