//! `[offload] upload = "all"` or `"events"`: wires edgerec-offload's agent
//! to the recorder, which tells it of each file it closes and each event's
//! window, and never waits on it.

use std::sync::Arc;
use std::time::Duration;

use edgerec_config::{Config, OffloadMode};
use edgerec_offload::agent::{Agent, Announcement, Kind};
use edgerec_offload::queue::{Select, Span};
use edgerec_offload::{credentials, s3::Client, Settings, Uploader};
use edgerec_recorder::{AnnounceFn, AnnouncedKind};

/// The agent, when `offload.upload` asks for one; an error names what in
/// `[offload]` or the credentials is wrong.
pub fn start(cfg: &Config) -> Result<Option<Agent>, String> {
    let select = match cfg.offload.upload {
        OffloadMode::None => return Ok(None),
        OffloadMode::All => Select::All,
        OffloadMode::Events => Select::Events,
    };
    let settings = Settings::from_config(&cfg.offload).map_err(|e| e.to_string())?;
    let secret = credentials::load(&settings.credentials_file, &settings.profile)
        .map_err(|e| e.to_string())?;
    let client = Client::new(&settings, &secret).map_err(|e| e.to_string())?;
    let uploader = Uploader::new(client, &settings);
    Agent::start(uploader, settings, select)
        .map(Some)
        .map_err(|e| format!("starting the offload thread: {e}"))
}

/// What the recorder calls with each announcement.
pub fn on_announce(agent: &Agent) -> AnnounceFn {
    let announce = agent.announcer();
    Arc::new(move |a| {
        let kind = match a.kind {
            AnnouncedKind::Segment => Kind::Segment,
            AnnouncedKind::Clip => Kind::Clip,
            AnnouncedKind::Event => Kind::Event,
        };
        // A segment recovered after a failure: its span is read later.
        let span = (a.start_ns != 0 || a.end_ns != 0).then_some(Span {
            start_ns: a.start_ns,
            end_ns: a.end_ns,
        });
        announce(Announcement {
            path: a.path,
            kind,
            span,
        });
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
    if st.held > 0 {
        println!(
            "offload:   {} segments kept on the vehicle: no event overlaps them (offload.upload = \"events\")",
            st.held
        );
    }
}
