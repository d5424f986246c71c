//! `[offload] upload = "all"` or `"events"`: wires edgerec-offload's agent
//! to the recorder, which tells it of each file it closes and each event's
//! window, and never waits on it.

use std::sync::Arc;
use std::time::Duration;

use edgerec_config::{Config, OffloadMode};
use edgerec_health::status::{OffloadClass, OffloadView};
use edgerec_offload::agent::{Agent, AgentStatus, Announcement, Kind};
use edgerec_offload::ledger::Ledger;
use edgerec_offload::queue::{Class, Select, Span};
use edgerec_offload::{credentials, s3::Client, Settings, Uploader};
use edgerec_recorder::retention::OffloadAware;
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
    let ledger = Ledger::open(&settings.journal_dir).map_err(|e| {
        format!(
            "{}: the ledger of what was sent: {e} (offload.journal_dir must be a writable directory)",
            settings.journal_dir.display()
        )
    })?;
    let agent = Agent::start(uploader, settings, select, ledger)
        .map_err(|e| format!("starting the offload thread: {e}"))?;
    Ok(Some(agent))
}

/// What retention is told of offload: the ledger, and
/// `offload.delete_after_upload` / `keep_unsent_clips`.
pub fn retention(cfg: &Config, agent: &Agent) -> OffloadAware {
    let ledger = agent.ledger();
    OffloadAware {
        uploaded: Arc::new(move |p| ledger.has(p)),
        delete_after_upload: cfg.offload.delete_after_upload,
        keep_unsent_clips: cfg.offload.keep_unsent_clips,
    }
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

/// The agent's status as the health side shows it, with retention's
/// count of files deleted before they were sent.
pub fn view(st: &AgentStatus, deleted_unsent: u64) -> OffloadView {
    OffloadView {
        link: st.link.clone(),
        rate_bytes_per_s: st.rate,
        max_rate_bytes_per_s: st.max_rate,
        queue: Class::ALL
            .iter()
            .zip(st.classes.iter())
            .map(|(c, l)| OffloadClass {
                class: c.as_str().to_owned(),
                files: l.files,
                bytes: l.bytes,
                oldest_s: l.oldest.as_secs_f64(),
            })
            .collect(),
        sent_files: st.sent,
        sent_bytes: st.sent_bytes,
        clips: st.clips,
        manifests: st.manifests,
        failures: st.failures,
        held: st.held,
        deleted_unsent,
        last_error: st.last_error.clone(),
    }
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
