//! The `r2r` backend: rcl on an installed ROS 2 through r2r, so it records
//! over whatever RMW the image runs (Fast DDS with shared memory, Zenoh,
//! Cyclone DDS), raw CDR from `Node::subscribe_raw`.
//!
//! One node per run, driven by the run thread alone: every discovery
//! interval it polls the graph (rcl graph queries), lets the [`Graph`] decide
//! and subscribes or subscribes again; in between it spins the node with a
//! short timeout and, after every spin, empties each subscription's stream
//! into the sink without blocking. An error ends the run, and the
//! supervisor restarts the source with a fresh node.
//!
//! Known limits, from r2r 0.9.7:
//! - `subscribe_raw` discards the message info, so there is no source
//!   timestamp: `publish_time` is `log_time`. A subscription replaced for
//!   a new QoS is told apart from its successor by payload
//!   ([`crate::overlap`]); one that becomes transient-local gets the
//!   writers' history again, and what the old one had received before
//!   the replacement is recorded twice.
//! - r2r hands messages over through a channel of 10 with `try_send`, which
//!   drops silently when full. A spin takes at most one message per
//!   subscription and the stream is emptied after each spin, so it never
//!   holds more than one; a topic faster than the loop loses messages in
//!   rmw's history (keep last `depth`) instead, uncounted: r2r reports no
//!   lost samples, so `lost_upstream` stays 0.
//! - A type must be in r2r's generated table (the packages sourced when
//!   edgerec was built), even for raw bytes; a topic of any other type is
//!   not recorded and a warning says so.
//! - r2r makes one rcl context per process, from `ROS_DOMAIN_ID` and the
//!   process's arguments, and keeps it (a failed `rcl_init` fails every
//!   restart): `domain_id` must equal `ROS_DOMAIN_ID`. There is no
//!   `topic_type_hash` metadata (r2r leaves it out of the endpoint info).

mod discovery;
mod qos;
mod subscription;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use edgerec_source::{Source, SourceError, SourceSink, Stop};

use crate::channels::Definitions;
use crate::graph::{Action, Graph, TopicKey};
use crate::names;
use crate::options::RosOptions;
use crate::polled::PolledPublishers;
use crate::setup::RosSetup;
use crate::stats::StatsTable;
use crate::RosError;

use discovery::OwnNode;
use subscription::{OpenError, Subscription};

/// The longest a spin waits for a message: a stop is seen within it.
const SPIN_TIMEOUT: Duration = Duration::from_millis(20);

/// An r2r error as edgerec's.
fn rcl_error(call: impl Into<String>, e: ::r2r::Error) -> RosError {
    RosError::Middleware {
        call: call.into(),
        reason: e.to_string(),
    }
}

/// The domain rcl joins: `ROS_DOMAIN_ID`, 0 when unset or empty.
fn process_domain() -> Result<u32, RosError> {
    let bad = |reason: String| RosError::Selection {
        what: "domain_id".into(),
        reason,
    };
    match std::env::var("ROS_DOMAIN_ID") {
        Err(std::env::VarError::NotPresent) => Ok(0),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(bad(format!("ROS_DOMAIN_ID={v:?} is not a number")))
        }
        Ok(v) if v.trim().is_empty() => Ok(0),
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| bad(format!("ROS_DOMAIN_ID={v:?} is not a number"))),
    }
}

/// The ROS 2 source on r2r.
pub struct R2rSource {
    setup: RosSetup,
}

impl R2rSource {
    /// Checks the options (a mistake is a configuration error, not a
    /// restart) and makes the source.
    pub fn new(opts: RosOptions, defs: Arc<dyn Definitions>) -> Result<Self, RosError> {
        let setup = RosSetup::new(opts, defs)?;
        let opts = &setup.opts;
        let env = process_domain()?;
        if env != opts.domain_id {
            return Err(RosError::Selection {
                what: "domain_id".into(),
                reason: format!(
                    "the r2r backend joins the domain in ROS_DOMAIN_ID ({env}), not {}: set \
                     ROS_DOMAIN_ID={} in edgerec's environment or domain_id = {env}",
                    opts.domain_id, opts.domain_id
                ),
            });
        }
        Ok(R2rSource { setup })
    }

    /// Per-topic counts (received, duplicates skipped), for the status.
    pub fn stats(&self) -> Arc<StatsTable> {
        self.setup.stats.clone()
    }
}

impl Source for R2rSource {
    fn name(&self) -> String {
        "ros".into()
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let setup = &self.setup;
        let opts = &setup.opts;
        let device = |e: RosError| SourceError::Device {
            device: format!("ros (r2r, domain {})", opts.domain_id),
            reason: e.to_string(),
        };
        let ctx = ::r2r::Context::create().map_err(|e| device(rcl_error("rcl_init", e)))?;
        let fqn = names::node_fqn(&opts.namespace, &opts.node_name);
        let node = ::r2r::Node::create(ctx, &opts.node_name, &opts.namespace)
            .map_err(|e| device(rcl_error(format!("rcl_node_init {fqn}"), e)))?;
        let own = OwnNode {
            name: node
                .name()
                .map_err(|e| device(rcl_error("rcl_node_get_name", e)))?,
            namespace: node
                .namespace()
                .map_err(|e| device(rcl_error("rcl_node_get_namespace", e)))?,
        };
        let mut run = Run {
            node,
            own,
            graph: setup.graph(),
            polled: PolledPublishers::default(),
            subs: BTreeMap::new(),
            setup,
            sink,
        };
        let mut cx = Context::from_waker(Waker::noop());
        let mut next_poll = Instant::now();
        loop {
            sink.alive();
            if Instant::now() >= next_poll {
                next_poll = Instant::now() + opts.discovery_interval;
                run.discover(&mut cx).map_err(|e| match e {
                    RunError::Ros(e) => device(e),
                    RunError::Source(e) => e,
                })?;
            }
            let until_poll = next_poll.saturating_duration_since(Instant::now());
            if run.subs.is_empty() {
                // With nothing to wait on rcl_wait returns at once: sleep.
                if stop.wait_timeout(until_poll) {
                    break;
                }
                continue;
            }
            run.node.spin_once(SPIN_TIMEOUT.min(until_poll));
            let now = Instant::now();
            for s in run.subs.values_mut() {
                s.drain(sink, &mut cx, now).map_err(device)?;
            }
            if stop.is_requested() {
                break;
            }
        }
        // Streams go before the node, which destroys the subscriptions.
        drop(run.subs);
        drop(run.node);
        Ok(())
    }
}

/// Why a poll of the graph ended the run.
enum RunError {
    /// rcl refused.
    Ros(RosError),
    /// A channel could not be registered.
    Source(SourceError),
}

impl From<RosError> for RunError {
    fn from(e: RosError) -> Self {
        RunError::Ros(e)
    }
}

/// One run's node and what it records.
struct Run<'a> {
    node: ::r2r::Node,
    own: OwnNode,
    graph: Graph,
    polled: PolledPublishers,
    subs: BTreeMap<TopicKey, Subscription>,
    setup: &'a RosSetup,
    sink: &'a SourceSink,
}

impl Run<'_> {
    /// Polls the graph and subscribes to what the graph decides.
    fn discover(&mut self, cx: &mut Context<'_>) -> Result<(), RunError> {
        let now = discovery::poll(&self.node, &self.setup.selection, &self.own)?;
        let changes = self.polled.update(now);
        for gid in changes.left {
            if let Some(p) = self.graph.remove(&gid) {
                tracing::info!(topic = %p.topic, "a publisher left; its channel stays open for its return");
            }
        }
        let mut actions = Vec::new();
        for p in changes.appeared {
            actions.extend(self.graph.add(p));
        }
        for a in actions {
            self.act(a, cx)?;
        }
        self.setup.set_missing(&self.graph);
        Ok(())
    }

    fn act(&mut self, action: Action, cx: &mut Context<'_>) -> Result<(), RunError> {
        let setup = self.setup;
        match action {
            Action::Warn(w) => setup.warn(w),
            Action::Subscribe {
                key,
                request,
                offers,
                type_hash,
            } => {
                // Subscribed before the channel is registered: a type r2r
                // cannot subscribe to leaves no empty channel behind.
                let stream = match subscription::open(&mut self.node, &key, &request) {
                    Ok(s) => s,
                    Err(OpenError::NotInTypeTable(w)) => {
                        setup.warn(w);
                        return Ok(());
                    }
                    Err(OpenError::Middleware(e)) => return Err(e.into()),
                };
                let spec = setup.channel_spec(&key, &request, &offers, type_hash.as_deref());
                let channel = self
                    .sink
                    .register(spec)
                    .map_err(|e| RunError::Source(e.into()))?;
                tracing::info!(topic = %key.topic, type_name = %key.type_name, ?request, "recording");
                let sub =
                    Subscription::new(key.clone(), channel, setup.stats.counters(&key), stream);
                self.subs.insert(key, sub);
            }
            Action::Resubscribe { key, request } => {
                let Some(sub) = self.subs.get_mut(&key) else {
                    // Not subscribed: its type is not in r2r's table.
                    return Ok(());
                };
                sub.drain(self.sink, cx, Instant::now())?;
                match subscription::open(&mut self.node, &key, &request) {
                    Ok(stream) => {
                        sub.replace(stream, Instant::now());
                        tracing::info!(topic = %sub.key().topic, ?request, "QoS changed with the publishers: subscribed again");
                    }
                    Err(OpenError::NotInTypeTable(w)) => setup.warn(w),
                    Err(OpenError::Middleware(e)) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }
}
