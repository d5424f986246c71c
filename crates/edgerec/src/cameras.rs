//! `[[camera]]` of the configuration into camera sources; a `topic` camera
//! gets the image feed the ROS 2 source fills. A build without the
//! `camera` feature (the static QEMU board binary) refuses a configuration
//! with cameras, saying so.

#[cfg(feature = "camera")]
pub use with_camera::*;
#[cfg(not(feature = "camera"))]
pub use without_camera::*;

#[cfg(feature = "camera")]
mod with_camera {
    use anyhow::Context;
    use edgerec_camera::{CameraSource, ImageTap};
    use edgerec_config::{CameraSourceKind, Config};

    /// A camera source.
    pub type Camera = CameraSource;

    /// A topic camera's input: (input topic, record it too, where its
    /// images go).
    pub type TopicInput = (String, bool, ImageTap);

    /// Offers one received image message from `publisher` to a topic
    /// camera.
    pub fn offer(tap: &ImageTap, bytes: &[u8], at: u64, publisher: u64) {
        tap.offer(bytes, at, publisher);
    }

    /// The cameras, each checked (GStreamer, encoder, elements, pipeline),
    /// and the inputs the ROS 2 source must fill.
    pub fn sources(cfg: &Config) -> anyhow::Result<(Vec<Camera>, Vec<TopicInput>)> {
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
}

#[cfg(not(feature = "camera"))]
mod without_camera {
    use edgerec_config::Config;

    /// No camera in this build.
    pub enum Camera {}

    impl edgerec_source::Source for Camera {
        fn name(&self) -> String {
            match *self {}
        }
        fn run(
            &mut self,
            _: &edgerec_source::SourceSink,
            _: &edgerec_source::Stop,
        ) -> Result<(), edgerec_source::SourceError> {
            match *self {}
        }
    }

    /// No image tap in this build.
    pub enum Tap {}

    /// A topic camera's input (none in this build).
    pub type TopicInput = (String, bool, Tap);

    /// Never called: there is no tap.
    pub fn offer(tap: &Tap, _: &[u8], _: u64, _: u64) {
        match *tap {}
    }

    /// No cameras: a configuration with some is refused.
    pub fn sources(cfg: &Config) -> anyhow::Result<(Vec<Camera>, Vec<TopicInput>)> {
        if !cfg.camera.is_empty() {
            anyhow::bail!(
                "camera[0]: this edgerec was built without cameras (the `camera` feature, which \
                 links GStreamer; the static QEMU board build leaves it out): remove the \
                 [[camera]] entries or use a build with cameras"
            );
        }
        Ok((Vec::new(), Vec::new()))
    }
}
