//! The contract between a source and the supervisor that runs it.

use crate::error::SourceError;
use crate::sink::SourceSink;
use crate::stop::Stop;

/// Something that produces messages: synthetic sensors, ROS 2 topics,
/// cameras, CAN and UDP sockets.
///
/// The supervisor calls [`run`](Source::run) on a thread of its own and
/// calls it again, on the same instance, after the run failed: an error,
/// a panic, or silence past the stage deadline. So:
/// - `run` registers its channels every time it starts (registration is
///   idempotent: the same topic and type get the channel they had) and
///   may register more at any time, from any clone of the sink;
/// - what must survive a restart (a sequence number, a device path) lives
///   in `self`; what a run opens (sockets, pipelines, DDS readers) it opens
///   again, and never assumes the previous run closed it cleanly (a panic
///   unwinds through it);
/// - it returns `Ok(())` when `stop` is requested, promptly: it never
///   blocks without watching `stop` (see [`crate::stop`] for the ways);
/// - it never blocks on the pipeline: [`SourceSink::push`] does not;
/// - it shows it is alive at least once per stage deadline, by pushing or
///   by [`SourceSink::alive`]; a run silent for longer is stopped and
///   restarted;
/// - an error that a restart cannot cure (a bad configuration) is
///   [`SourceError::Config`]: the source is then marked failed and left
///   alone. Returning `Ok(())` before stop is requested means the source
///   has nothing more to give (a file played to its end): it is marked
///   finished and not restarted.
pub trait Source: Send + 'static {
    /// A short name for logs and the status (`synthetic /imu`, `ros2`).
    fn name(&self) -> String;

    /// Produces messages until `stop` is requested.
    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError>;
}
