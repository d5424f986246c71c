//! `[remote] broker`: wires edgerec-remote's link to the health side,
//! which it reads the status from and shows its state in. The recorder
//! never waits on it.

use edgerec_config::Config;
use edgerec_health::status::{RemoteView, StatusBoard};
use edgerec_remote::{Link, LinkStatus, Settings};

/// The link, when `remote.broker` names one; an error names what in
/// `[remote]` or its files is wrong. A broker that does not answer is not
/// an error: the link keeps trying, and the health state says so.
pub fn start(cfg: &Config, board: StatusBoard) -> Result<Option<Link>, String> {
    let Some(settings) = Settings::from_config(cfg).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let feed = Box::new(move || {
        let json = board.json();
        (!json.is_empty()).then(|| json.to_string())
    });
    Link::start(settings, feed)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The link's state as the health side shows it.
pub fn view(st: &LinkStatus) -> RemoteView {
    RemoteView {
        broker: st.broker.clone(),
        prefix: st.prefix.clone(),
        connected: st.connected,
        for_s: st.for_s,
        connects: st.connects,
        disconnects: st.disconnects,
        published: st.published,
        queued: st.queued as u64,
        dropped: st.dropped,
        last_error: st.last_error.clone(),
        down: st.down.clone(),
    }
}
