//! `[[camera]]` of the configuration into camera sources; a `topic` camera
//! gets the image feed the ROS 2 source fills.

use anyhow::Context;
use edgerec_camera::{CameraSource, ImageTap};
use edgerec_config::{CameraSourceKind, Config};

/// A topic camera's input: (input topic, record it too, where its images
/// go).
pub type TopicInput = (String, bool, ImageTap);

/// The cameras, each checked (GStreamer, encoder, elements, pipeline), and
/// the inputs the ROS 2 source must fill.
pub fn sources(cfg: &Config) -> anyhow::Result<(Vec<CameraSource>, Vec<TopicInput>)> {
    let mut cams = Vec::new();
    let mut taps = Vec::new();
    for (i, c) in cfg.camera.iter().enumerate() {
        let feed = if c.source == CameraSourceKind::Topic {
            let (tap, feed) = edgerec_camera::feed();
            taps.push((c.input_topic.clone(), c.record_raw_input, tap));
            Some(feed)
        } else {
            None
        };
        let cam = CameraSource::new(c, feed).with_context(|| format!("camera[{i}]"))?;
        cams.push(cam);
    }
    Ok((cams, taps))
}
