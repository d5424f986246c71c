//! `[remote] broker`: wires edgerec-remote's link to the health side,
//! which it reads the status from and shows its state in. The recorder
//! never waits on it.

use std::sync::{Arc, OnceLock};

use edgerec_config::Config;
use edgerec_health::status::{RemoteView, StatusBoard};
use edgerec_remote::commands::Commands;
use edgerec_remote::logfwd::LogForward;
use edgerec_remote::{Link, LinkStatus, Settings};
use edgerec_ros::audit::Surface;
use edgerec_ros::control::{execute_in, Command, ControlSlot, Reply};
use edgerec_ros::rate_limit::Requester;

/// The link, when `remote.broker` names one; an error names what in
/// `[remote]` or its files is wrong. A broker that does not answer is not
/// an error: the link keeps trying, and the health state says so. The
/// fleet's commands go to `controls`, the one command model the control
/// socket and the ROS 2 services share.
pub fn start(
    cfg: &Config,
    board: StatusBoard,
    controls: ControlSlot,
) -> Result<Option<Link>, String> {
    let Some(settings) = Settings::from_config(cfg).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let feed = Box::new(move || {
        let json = board.json();
        (!json.is_empty()).then(|| json.to_string())
    });
    let commands: Arc<dyn Commands> = Arc::new(FleetCommands(controls));
    let link = Link::start(settings, feed, Some(commands)).map_err(|e| e.to_string())?;
    let handle = link.handle();
    log_forward().attach(Box::new(move |line| handle.publish("log", line, false)));
    Ok(Some(link))
}

/// The layer that forwards warnings and errors to the fleet, the same one
/// for the logging set-up and for [`start`], which attaches the link.
pub fn log_forward() -> LogForward {
    static FORWARD: OnceLock<LogForward> = OnceLock::new();
    FORWARD.get_or_init(LogForward::default).clone()
}

/// The fleet's commands on the shared model: its rate limits, its audit
/// trail (surface "fleet link").
struct FleetCommands(ControlSlot);

impl Commands for FleetCommands {
    fn run(&self, command: &Command, who: &Requester) -> Reply {
        let reply = execute_in(&self.0, command, who);
        self.0.audit(Surface::FleetLink, who, command, &reply);
        reply
    }

    fn refused(&self, command: Option<&Command>, text: &str, who: &Requester, reason: &str) {
        match command {
            Some(c) => {
                let reply = Reply {
                    ok: false,
                    paused: false,
                    message: reason.to_owned(),
                };
                self.0.audit(Surface::FleetLink, who, c, &reply);
            }
            // Not understood: no command to record in the bag; the
            // journal has it.
            None => tracing::info!(
                target: "edgerec::audit",
                surface = Surface::FleetLink.as_str(),
                client = %who,
                command = text,
                accepted = false,
                result = reason,
                "{who} (fleet link): {text}: refused"
            ),
        }
    }
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
        commands_run: st.commands_run,
        commands_rejected: st.commands_rejected,
    }
}
