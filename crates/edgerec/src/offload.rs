//! `[offload] upload = "all"`: wires edgerec-offload's agent to the
//! recorder, which tells it of each file it closes and never waits on it.

use std::sync::Arc;
use std::time::Duration;

use edgerec_config::{Config, OffloadMode};
use edgerec_offload::agent::{Agent, Closed};
use edgerec_offload::{credentials, s3::Client, Settings, Uploader};
use edgerec_recorder::{ClosedFn, ClosedKind};

/// The agent, when `offload.upload` asks for one; an error names what in
/// `[offload]` or the credentials is wrong.
pub fn start(cfg: &Config) -> Result<Option<Agent>, String> {
    if cfg.offload.upload == OffloadMode::None {
        return Ok(None);
    }
    let settings = Settings::from_config(&cfg.offload).map_err(|e| e.to_string())?;
    let secret = credentials::load(&settings.credentials_file, &settings.profile)
        .map_err(|e| e.to_string())?;
    let client = Client::new(&settings, &secret).map_err(|e| e.to_string())?;
    let uploader = Uploader::new(client, &settings);
    Agent::start(uploader, settings)
        .map(Some)
        .map_err(|e| format!("starting the offload thread: {e}"))
}

/// What the recorder calls with each closed file.
pub fn on_closed(agent: &Agent) -> ClosedFn {
    let announce = agent.announcer();
    Arc::new(move |c| {
        let kind = match c.kind {
            ClosedKind::Segment => Closed::Segment,
            ClosedKind::Clip => Closed::Clip,
        };
        announce(c.path, kind);
    })
}

/// Lets the queue drain for at most `drain` (`offload.drain_on_stop`),
/// then prints what was sent and what is left.
pub fn finish(agent: Agent, drain: Duration) {
    let st = agent.finish(drain);
    println!(
        "offload:   {} files sent ({:.1} MB), {} event clips, {} session manifests, {} waiting ({:.1} MB), {} failed tries{}",
        st.sent,
        st.sent_bytes as f64 / 1e6,
        st.clips,
        st.manifests,
        st.queued,
        st.queued_bytes as f64 / 1e6,
        st.failures,
        st.last_error
            .map(|e| format!("; last: {e}"))
            .unwrap_or_default()
    );
}
