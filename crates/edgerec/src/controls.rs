//! The operator's commands (`edgerec ctl`, rosbag2's recorder services) on
//! the running recorder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use edgerec_health::access::{Need, Policy};
use edgerec_health::ctl::{user_name, Access, CtlHandler, CtlServer, Peer};
use edgerec_health::own_topics::AuditRecords;
use edgerec_health::status::StatusBoard;
use edgerec_offload::agent::AgentView;
use edgerec_offload::ledger::Ledger;
use edgerec_recorder::StatusHandle;
use edgerec_ros::audit::{AuditSink, Audited, Surface};
use edgerec_ros::control::{
    execute_in, Command, ControlSlot, Controls, OffloadVerb, Reply, Window,
};
use edgerec_ros::rate_limit::Requester;

/// Sessions and clips `list` names at most, each.
const LIST_MAX: usize = 50;

/// The recorder, as the commands see it: its status handle, its offload
/// when on (and the ledger of what is at the store), the status board and
/// the recordings' root.
pub struct RecorderControls {
    /// The running recorder.
    pub recorder: StatusHandle,
    /// Offload, when `offload.upload` is on.
    pub offload: Option<(AgentView, Ledger)>,
    /// The status snapshot the health side publishes.
    pub board: StatusBoard,
    /// `recording.root`.
    pub root: PathBuf,
}

impl Controls for RecorderControls {
    fn pause(&self, who: &str) {
        self.recorder.pause(who);
    }
    fn resume(&self, who: &str) {
        self.recorder.resume(who);
    }
    fn is_paused(&self) -> bool {
        self.recorder.is_paused()
    }
    fn split(&self) {
        self.recorder.split();
    }
    fn status(&self) -> Result<String, String> {
        let json = self.board.json();
        if json.is_empty() {
            return Err("the recorder is still starting; try again".into());
        }
        Ok(json.to_string())
    }
    fn list(&self) -> Result<String, String> {
        let ledger = self.offload.as_ref().map(|(_, l)| l.clone());
        let sent = ledger.map(|l| move |p: &Path| l.has(p));
        let uploaded: edgerec_recorder::inventory::Uploaded<'_> =
            sent.as_ref().map(|f| f as &dyn Fn(&Path) -> bool);
        Ok(edgerec_recorder::inventory::list(&self.root, LIST_MAX, uploaded).to_string())
    }
    fn trigger(&self, name: &str, reason: &str, window: Window) -> Result<String, String> {
        if self
            .recorder
            .trigger_window(name, reason, window.pre, window.post)
        {
            Ok(format!(
                "event {} recorded: its clip goes under <recording.root>/events/",
                if name.is_empty() { "ctl" } else { name }
            ))
        } else if self.recorder.events().is_none() {
            Err(
                "this recording makes no event clips: set recording.mode = \"triggered\" or \"mixed\""
                    .into(),
            )
        } else {
            Err("the events stage did not take the event within 1 s (it is far behind, or the recording is ending); see edgerec status".into())
        }
    }
    fn offload(&self, verb: OffloadVerb, who: &str) -> Result<String, String> {
        let Some((a, _)) = &self.offload else {
            return Err(
                "offload is off in this recording: set offload.upload = \"all\" or \"events\""
                    .into(),
            );
        };
        match verb {
            OffloadVerb::Status => {
                let view =
                    crate::offload::view(&a.status(), self.recorder.snapshot().deleted_unsent);
                serde_json::to_string(&view).map_err(|e| e.to_string())
            }
            OffloadVerb::Pause => {
                tracing::info!("offload: pause asked by {who}");
                a.pause(who);
                Ok(format!(
                    "offload paused (by {who}) after the request in flight"
                ))
            }
            OffloadVerb::Resume => {
                tracing::info!("offload: resume asked by {who}");
                a.resume(who);
                Ok(format!("offload resumed (by {who})"))
            }
            OffloadVerb::Retry => {
                a.retry(who);
                Ok("every waiting file is tried now".into())
            }
        }
    }
}

/// The control socket, serving the commands in `slot` to the peers
/// `health.control_group` and `health.read_group` allow (root and the
/// recorder's own user always). Every request that reaches a command goes
/// to the audit trail (`ControlSlot::audit`): who (uid, user, pid), what,
/// and whether it was carried out or refused, and why.
pub fn serve(
    path: &std::path::Path,
    control_group: &str,
    read_group: &str,
    slot: ControlSlot,
) -> anyhow::Result<CtlServer> {
    let policy = Policy::from_names(control_group, read_group)?;
    let handler: CtlHandler = Arc::new(move |line: &str, peer: &Peer| {
        let who = Requester::Local {
            uid: peer.uid,
            pid: peer.pid,
            user: user_name(peer.uid),
        };
        let reply = match line.parse::<Command>() {
            Ok(cmd) => {
                let need = if cmd.changes_anything() {
                    Need::Control
                } else {
                    Need::Read
                };
                let reply = match policy.check(peer, need, cmd.verb()) {
                    Ok(()) => execute_in(&slot, &cmd, &who),
                    Err(refused) => Reply {
                        ok: false,
                        paused: false,
                        message: refused,
                    },
                };
                slot.audit(Surface::ControlSocket, &who, &cmd, &reply);
                reply
            }
            Err(e) => Reply {
                ok: false,
                paused: false,
                message: format!("{e}"),
            },
        };
        reply.json()
    });
    Ok(CtlServer::unix(
        path,
        // Any local user may connect: the policy above decides.
        Access {
            gid: None,
            mode: 0o666,
        },
        handler,
    )?)
}

/// Where the audit trail sends each request besides the log: the ones
/// that change something (carried out or refused) go to `records`, one
/// JSON object each, for `/edgerec/audit`.
pub fn audit_sink(records: Arc<AuditRecords>) -> AuditSink {
    Arc::new(move |a: &Audited<'_>| {
        if !a.command.changes_anything() {
            return;
        }
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut v = serde_json::json!({
            "unix_ns": unix_ns,
            "surface": a.surface.as_str(),
            "who": a.who.to_string(),
            "command": a.command.to_string(),
            "accepted": a.reply.ok,
            "result": a.reply.message,
        });
        match a.who {
            Requester::Local { uid, pid, user } => {
                v["uid"] = (*uid).into();
                v["pid"] = (*pid).into();
                if let Some(u) = user {
                    v["user"] = u.as_str().into();
                }
            }
            Requester::RosClient { id } => v["client"] = id.as_str().into(),
            Requester::Fleet {
                broker,
                command_id,
                by,
            } => {
                v["broker"] = broker.as_str().into();
                v["command_id"] = command_id.as_str().into();
                if let Some(by) = by {
                    v["issued_by"] = by.as_str().into();
                }
            }
            Requester::Unknown => {}
        }
        records.push(v.to_string());
    })
}
