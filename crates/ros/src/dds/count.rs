//! A reader that only counts: the bare receiver `scripts/bench --ros`
//! compares edgerec against. Same participant configuration, same blob
//! topic, same QoS request and the same take loop as the recording path;
//! only what happens to a sample differs (counted and dropped, where
//! edgerec copies it into the pipeline).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use cyclors::dds_entity_t;

use super::ffi::{self, Participant};
use super::DEFAULT_CONFIG;
use crate::names;
use crate::qos::RequestQos;
use crate::RosError;

/// Messages and payload bytes received.
#[derive(Debug, Default)]
pub struct Counts {
    /// Samples taken.
    pub messages: AtomicU64,
    /// Their serialized bytes.
    pub bytes: AtomicU64,
}

unsafe extern "C" fn on_data(reader: dds_entity_t, arg: *mut c_void) {
    // SAFETY: `arg` is the Counts of this reader, boxed and alive until
    // the reader is deleted in CountingReader::drop.
    let c = unsafe { &*(arg as *const Counts) };
    ffi::take_raw(reader, |_, bytes| {
        c.messages.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    });
}

/// Counts one topic's samples.
pub struct CountingReader {
    reader: dds_entity_t,
    counts: *mut Counts,
    _dp: Participant,
}

// SAFETY: `counts` is read through shared atomics only, and freed in drop
// after the reader (and so its listener) is gone.
unsafe impl Send for CountingReader {}

impl CountingReader {
    /// Joins `domain_id` with edgerec's DDS configuration (unless
    /// `CYCLONEDDS_URI` is set) and reads `topic` of `type_name` with
    /// `request`.
    pub fn new(
        domain_id: u32,
        topic: &str,
        type_name: &str,
        request: &RequestQos,
    ) -> Result<Self, RosError> {
        let config = std::env::var_os("CYCLONEDDS_URI")
            .is_none()
            .then_some(DEFAULT_CONFIG);
        let dp = Participant::new(domain_id, config)?;
        let dds_type = names::dds_type(type_name).ok_or_else(|| RosError::Middleware {
            call: format!("count {topic}"),
            reason: format!("{type_name} is not a pkg/msg/Type name"),
        })?;
        let t = dp.blob_topic(&names::dds_topic(topic), &dds_type)?;
        let counts = Box::into_raw(Box::new(Counts::default()));
        // SAFETY: `counts` outlives the reader (freed in drop after it);
        // on_data does not unwind (atomics and take_raw only).
        match unsafe { dp.blob_reader(t, request, on_data, counts as *mut c_void) } {
            Ok(reader) => Ok(CountingReader {
                reader,
                counts,
                _dp: dp,
            }),
            Err(e) => {
                // SAFETY: no reader holds it.
                drop(unsafe { Box::from_raw(counts) });
                Err(e)
            }
        }
    }

    /// (messages, bytes) so far.
    pub fn counts(&self) -> (u64, u64) {
        // SAFETY: alive while self is.
        let c = unsafe { &*self.counts };
        (
            c.messages.load(Ordering::Relaxed),
            c.bytes.load(Ordering::Relaxed),
        )
    }
}

impl Drop for CountingReader {
    fn drop(&mut self) {
        ffi::delete(self.reader);
        // SAFETY: the reader and its listener are gone; from Box::into_raw.
        drop(unsafe { Box::from_raw(self.counts) });
    }
}
