//! What a ROS source is made from, whichever backend runs it: the checked
//! options, the compiled selection, where message definitions come from
//! and the counts the status shows; and the steps both backends take the
//! same way (a topic's channel, a warning, the listed topics not seen).

use std::sync::Arc;

use edgerec_source::ChannelSpec;

use crate::channels::{self, Definitions};
use crate::graph::{Graph, GraphLimits, TopicKey};
use crate::options::RosOptions;
use crate::qos::{QosProfile, RequestQos};
use crate::selection::TopicSelection;
use crate::stats::StatsTable;
use crate::RosError;

/// A ROS source's options, checked, and what it records with.
pub struct RosSetup {
    /// The options.
    pub opts: RosOptions,
    /// The compiled topic selection.
    pub selection: TopicSelection,
    /// Where message definitions come from.
    pub defs: Arc<dyn Definitions>,
    /// Per-topic counts and warnings, for the status.
    pub stats: Arc<StatsTable>,
    /// Topics whose messages also go to another source (a camera that
    /// transcodes an image topic).
    pub taps: Vec<Tap>,
}

/// Receives each message of a topic as it arrives: the serialized bytes
/// (with their encapsulation header), the receive time on the recording
/// clock and the publisher (its DDS publication handle, for the tap to
/// tell peers apart in what it logs). Called on a DDS listener thread: it
/// must not block.
pub type TapFn = Arc<dyn Fn(&[u8], u64, u64) + Send + Sync>;

/// A topic another source takes its input from.
#[derive(Clone)]
pub struct Tap {
    /// The topic, fully qualified.
    pub topic: String,
    /// The type the tap understands (`sensor_msgs/msg/Image`); a publisher
    /// of another type is not tapped (and warned about).
    pub type_name: String,
    /// Also record the topic itself.
    pub record: bool,
    /// Where its messages go.
    pub f: TapFn,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap")
            .field("topic", &self.topic)
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

impl RosSetup {
    /// Checks the options (a mistake is a configuration error, not a
    /// restart) and compiles the selection.
    pub fn new(opts: RosOptions, defs: Arc<dyn Definitions>) -> Result<Self, RosError> {
        opts.check_domain()?;
        let selection = TopicSelection::new(&opts.selection, &opts.namespace, &opts.node_name)?;
        Ok(RosSetup {
            opts,
            selection,
            defs,
            stats: Arc::new(StatsTable::default()),
            taps: Vec::new(),
        })
    }

    /// Also subscribes to each tap's topic (added to the listed topics)
    /// and hands its messages to the tap.
    pub fn with_taps(mut self, taps: Vec<Tap>) -> Result<Self, RosError> {
        if taps.is_empty() {
            return Ok(self);
        }
        for t in &taps {
            if !self.opts.selection.topics.contains(&t.topic) {
                self.opts.selection.topics.push(t.topic.clone());
            }
        }
        self.selection = TopicSelection::new(
            &self.opts.selection,
            &self.opts.namespace,
            &self.opts.node_name,
        )?;
        self.taps = taps;
        Ok(self)
    }

    /// What happens to a topic about to be subscribed: the tap that takes
    /// it (if its type is the tap's), and whether it is recorded.
    pub fn tap_for(&self, key: &TopicKey) -> (Option<TapFn>, bool) {
        let Some(t) = self.taps.iter().find(|t| t.topic == key.topic) else {
            return (None, true);
        };
        if t.type_name != key.type_name {
            self.warn(format!(
                "{} is published as {}, not {}: it is not transcoded",
                key.topic, key.type_name, t.type_name
            ));
            return (None, true);
        }
        (Some(t.f.clone()), t.record)
    }

    /// An empty graph for a new run.
    pub fn graph(&self) -> Graph {
        Graph::new(self.selection.clone(), self.opts.qos_overrides.clone()).with_limits(
            GraphLimits::topics(self.opts.max_topics),
            self.opts.reserved_topics.iter().cloned(),
        )
    }

    /// Logs a warning and keeps it for the status.
    pub fn warn(&self, w: String) {
        tracing::warn!("{w}");
        self.stats.warn(w);
    }

    /// The channel of a topic about to be recorded; a type without a known
    /// definition is warned about (see [`channels::channel_spec`]).
    pub fn channel_spec(
        &self,
        key: &TopicKey,
        request: &RequestQos,
        offers: &[QosProfile],
        type_hash: Option<&str>,
    ) -> ChannelSpec {
        let (spec, warning) = channels::channel_spec(
            key,
            request,
            offers,
            type_hash,
            self.opts.qos_style,
            &*self.defs,
        );
        if let Some(w) = warning {
            self.warn(w);
        }
        spec
    }

    /// Tells the status which listed topics no publisher offers yet.
    pub fn set_missing(&self, graph: &Graph) {
        self.stats.set_refused(graph.refused());
        self.stats.set_missing(
            graph
                .missing_listed()
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
    }
}
