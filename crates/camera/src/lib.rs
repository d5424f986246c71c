//! Cameras, and ROS 2 image topics, encoded to H.265 in process and
//! recorded beside the topics: one `foxglove_msgs/msg/CompressedVideo` per
//! access unit, on the recording clock, every segment starting on a key
//! unit (the recorder cuts before one; see `edgerec-recorder`'s chunker).
//!
//! - [`encoder`]: which encoder (`nvv4l2h265enc`, `nvh265enc`, `x265enc`)
//!   and its properties, pure;
//! - [`launch`]: the pipeline description per source, pure;
//! - [`timing`]: capture instants on the recording clock, frame gaps;
//! - [`nal`], [`message`]: access units and their messages;
//! - [`image`]: `sensor_msgs/msg/Image` in, raw video caps out;
//! - [`source`]: the [`CameraSource`] the supervisor runs, one GStreamer
//!   pipeline on its own thread.
//!
//! And back out of a bag:
//!
//! - [`sps`]: the picture size in a sequence parameter set;
//! - [`figures`]: a video topic's measured size, rate, bitrate and
//!   keyframe interval (`edgerec info`);
//! - [`export`], [`mux`]: a video topic out as MP4, MOV, MKV or raw H.265
//!   (`edgerec export video`), without re-encoding.
#![deny(missing_docs)]

pub mod argus;
pub mod encoder;
pub mod export;
pub mod figures;
pub mod image;
pub mod launch;
pub mod message;
pub mod mux;
pub mod nal;
pub mod source;
pub mod sps;
pub mod timing;

pub use image::{feed, ImageFeed, ImageTap};
pub use source::{missing_elements, CameraError, CameraSource, CameraStats};
