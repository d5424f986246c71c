//! The sensor timestamps of a Jetson CSI camera: nvarguscamerasrc stamps
//! each buffer's PTS when it pushes it (`do-timestamp`), not when the
//! sensor exposed it, and attaches the sensor's own time and frame number
//! as mini-object qdata `GstBufferMetaData`: `AuxData { gint64 frame_num;
//! gint64 timestamp }`, the timestamp in CLOCK_MONOTONIC ns (NVIDIA's
//! forum thread "nvarguscamerasrc buffer metadata is missing"; read the
//! same way by strawlab's gst-plugin-nvargustime). A buffer probe on the
//! camera's src pad reads it before the converter and encoder (which do not
//! carry qdata), keyed by PTS, which they keep; the camera thread takes it
//! back for each access unit.
//!
//! Not run here (no Jetson): the layout is NVIDIA's, the probe is tested
//! against a buffer carrying the same qdata.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use gstreamer as gst;
use gstreamer::glib::translate::IntoGlib;
use gstreamer::prelude::*;

/// What nvarguscamerasrc attaches to each buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxData {
    /// The sensor's frame number.
    pub frame_num: i64,
    /// The sensor's timestamp, CLOCK_MONOTONIC ns.
    pub timestamp: i64,
}

/// The qdata name nvarguscamerasrc uses.
pub const QDATA: &str = "GstBufferMetaData";

/// Sensor data waiting for its access unit, by PTS (at most a second's
/// worth at 240 fps: the encoder is never that far behind).
#[derive(Debug, Clone, Default)]
pub struct SensorStamps(Arc<Mutex<VecDeque<(u64, AuxData)>>>);

const KEEP: usize = 256;

impl SensorStamps {
    /// Reads the qdata of `buffer`, if it carries one.
    pub fn read(buffer: &gst::BufferRef) -> Option<AuxData> {
        let quark = gst::glib::Quark::from_str(QDATA).into_glib();
        // SAFETY: `buffer` is a live GstBuffer (a GstMiniObject) for the
        // whole call; gst_mini_object_get_qdata only reads its qdata list
        // and returns the stored pointer or NULL. A non-NULL pointer under
        // this quark is nvarguscamerasrc's AuxData (NVIDIA's layout, two
        // gint64), alive as long as the buffer, and it is copied out here.
        unsafe {
            let ptr = gst::ffi::gst_mini_object_get_qdata(
                buffer.as_ptr() as *mut gst::ffi::GstMiniObject,
                quark,
            ) as *const AuxData;
            if ptr.is_null() {
                None
            } else {
                Some(std::ptr::read_unaligned(ptr))
            }
        }
    }

    /// Installs the probe on the camera element's src pad.
    pub fn probe(&self, camera: &gst::Element) -> bool {
        let Some(pad) = camera.static_pad("src") else {
            return false;
        };
        let stamps = self.clone();
        pad.add_probe(gst::PadProbeType::BUFFER, move |_, info| {
            if let Some(buffer) = info.buffer() {
                if let (Some(pts), Some(aux)) = (buffer.pts(), Self::read(buffer)) {
                    stamps.put(pts.nseconds(), aux);
                }
            }
            gst::PadProbeReturn::Ok
        })
        .is_some()
    }

    fn put(&self, pts: u64, aux: AuxData) {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if q.len() >= KEEP {
            q.pop_front();
        }
        q.push_back((pts, aux));
    }

    /// The sensor data of the frame with this PTS (older entries, frames
    /// the encoder never output, are dropped).
    pub fn take(&self, pts: u64) -> Option<AuxData> {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(&(p, aux)) = q.front() {
            if p < pts {
                q.pop_front();
                continue;
            }
            if p == pts {
                q.pop_front();
                return Some(aux);
            }
            return None;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn free_aux(p: gst::glib::ffi::gpointer) {
        // SAFETY: p came from Box::into_raw below.
        drop(unsafe { Box::from_raw(p as *mut AuxData) });
    }

    #[test]
    fn reads_the_qdata_nvarguscamerasrc_attaches() {
        gst::init().unwrap();
        let mut buffer = gst::Buffer::with_size(16).unwrap();
        buffer
            .get_mut()
            .unwrap()
            .set_pts(gst::ClockTime::from_nseconds(42));
        assert_eq!(SensorStamps::read(&buffer), None);
        let aux = Box::new(AuxData {
            frame_num: 7,
            timestamp: 123_456_789,
        });
        let quark = gst::glib::Quark::from_str(QDATA).into_glib();
        // SAFETY: the buffer is alive and writable; the qdata owns the box
        // and frees it with the buffer.
        unsafe {
            gst::ffi::gst_mini_object_set_qdata(
                buffer.as_mut_ptr() as *mut gst::ffi::GstMiniObject,
                quark,
                Box::into_raw(aux) as gst::glib::ffi::gpointer,
                Some(free_aux),
            );
        }
        let got = SensorStamps::read(&buffer).unwrap();
        assert_eq!((got.frame_num, got.timestamp), (7, 123_456_789));
        let s = SensorStamps::default();
        s.put(10, got);
        s.put(42, got);
        assert_eq!(s.take(42), Some(got));
        assert_eq!(s.take(42), None);
    }
}
