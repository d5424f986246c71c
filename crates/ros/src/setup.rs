//! What a ROS source is made from, whichever backend runs it: the checked
//! options, the compiled selection, where message definitions come from
//! and the counts the status shows; and the steps both backends take the
//! same way (a topic's channel, a warning, the listed topics not seen).

use std::sync::Arc;

use edgerec_source::ChannelSpec;

use crate::channels::{self, Definitions};
use crate::graph::{Graph, TopicKey};
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
        })
    }

    /// An empty graph for a new run.
    pub fn graph(&self) -> Graph {
        Graph::new(self.selection.clone(), self.opts.qos_overrides.clone())
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
        self.stats.set_missing(
            graph
                .missing_listed()
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
    }
}
