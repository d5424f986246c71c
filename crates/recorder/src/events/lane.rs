//! The lane from the chunker to the events stage: bounded in bytes and
//! messages, and never blocking the chunker. A message that does not fit
//! is refused (the chunker counts it as a drop of its channel), so writing
//! a clip can never make the continuous channels drop.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use super::ring::RingMessage;

/// Messages the lane holds at most.
const LANE_MESSAGES: usize = 1 << 16;

/// What the events stage is sent.
pub(crate) enum Input {
    /// A message of a clip channel or a rule's topic.
    Message {
        /// It goes to the pre-roll ring (a clip channel), not only to the
        /// rules.
        ring: bool,
        m: RingMessage,
    },
    /// `edgerec ctl trigger` (or the ROS 2 `~/trigger` service).
    Manual {
        /// The clip's name; empty = `ctl`.
        name: String,
        /// The operator's reason.
        reason: String,
        /// Before the event, ns; `None` = the rule's.
        pre_ns: Option<u64>,
        /// After the event, ns; `None` = the rule's.
        post_ns: Option<u64>,
    },
}

/// The sending end, held by the chunker and the status handle.
pub struct Lane {
    tx: SyncSender<Input>,
    bytes: AtomicU64,
    limit: u64,
    closed: AtomicBool,
    refused: AtomicU64,
}

impl Lane {
    /// A lane holding at most `limit` payload bytes, and its receiving end.
    pub(crate) fn new(limit: u64) -> (Lane, Receiver<Input>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(LANE_MESSAGES);
        (
            Lane {
                tx,
                bytes: AtomicU64::new(0),
                limit,
                closed: AtomicBool::new(false),
                refused: AtomicU64::new(0),
            },
            rx,
        )
    }

    /// Hands a message over; false when the lane is full or closed.
    pub(crate) fn offer(&self, ring: bool, m: RingMessage) -> bool {
        let len = m.payload.len() as u64;
        if self.bytes.load(Ordering::Relaxed) + len > self.limit {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.bytes.fetch_add(len, Ordering::Relaxed);
        match self.tx.try_send(Input::Message { ring, m }) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.bytes.fetch_sub(len, Ordering::Relaxed);
                self.refused.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Asks for a clip now; false when the stage has ended or has not
    /// made room in the lane within a second (it is far behind).
    pub(crate) fn trigger(
        &self,
        name: String,
        reason: String,
        pre_ns: Option<u64>,
        post_ns: Option<u64>,
    ) -> bool {
        let mut input = Input::Manual {
            name,
            reason,
            pre_ns,
            post_ns,
        };
        let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
        loop {
            match self.tx.try_send(input) {
                Ok(()) => return true,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) => {
                    if std::time::Instant::now() >= until {
                        return false;
                    }
                    input = back;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        }
    }

    /// Nothing more comes (the chunker ended): the stage ends once it has
    /// taken what the lane holds.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// True after [`close`](Self::close).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Messages refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The stage took a message of `len` payload bytes.
    pub(crate) fn taken(&self, len: usize) {
        self.bytes.fetch_sub(len as u64, Ordering::Relaxed);
    }
}
