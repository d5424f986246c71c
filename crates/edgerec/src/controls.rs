//! The operator's commands (`edgerec ctl`, rosbag2's recorder services) on
//! the running recorder.

use std::sync::Arc;

use edgerec_health::ctl::{Access, CtlHandler, CtlServer, Peer};
use edgerec_offload::agent::AgentView;
use edgerec_recorder::StatusHandle;
use edgerec_ros::control::{execute_in, Command, ControlSlot, Controls, OffloadVerb, Reply};
use edgerec_ros::rate_limit::Requester;

/// The recorder, as the commands see it, and its offload when on.
pub struct RecorderControls(pub StatusHandle, pub Option<AgentView>);

impl Controls for RecorderControls {
    fn pause(&self, who: &str) {
        self.0.pause(who);
    }
    fn resume(&self, who: &str) {
        self.0.resume(who);
    }
    fn is_paused(&self) -> bool {
        self.0.is_paused()
    }
    fn split(&self) {
        self.0.split();
    }
    fn trigger(&self, name: &str, reason: &str) -> Result<String, String> {
        if self.0.trigger(name, reason) {
            Ok(format!(
                "event {} recorded: its clip goes under <recording.root>/events/",
                if name.is_empty() { "ctl" } else { name }
            ))
        } else if self.0.events().is_none() {
            Err(
                "this recording makes no event clips: set recording.mode = \"triggered\" or \"mixed\""
                    .into(),
            )
        } else {
            Err("the events stage did not take the event within 1 s (it is far behind, or the recording is ending); see edgerec status".into())
        }
    }
    fn offload(&self, verb: OffloadVerb, who: &str) -> Result<String, String> {
        let Some(a) = &self.1 else {
            return Err(
                "offload is off in this recording: set offload.upload = \"all\" or \"events\""
                    .into(),
            );
        };
        match verb {
            OffloadVerb::Status => {
                let view = crate::offload::view(&a.status(), self.0.snapshot().deleted_unsent);
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

/// The control socket, serving the commands in `slot`.
pub fn serve(path: &std::path::Path, group: &str, slot: ControlSlot) -> anyhow::Result<CtlServer> {
    let gid = if group.is_empty() {
        None
    } else {
        Some(group_id(group)?)
    };
    let handler: CtlHandler =
        Arc::new(
            move |line: &str, peer: &Peer| match line.parse::<Command>() {
                Ok(cmd) => {
                    let who = Requester::Local {
                        uid: peer.uid,
                        pid: peer.pid,
                    };
                    execute_in(&slot, &cmd, &who).json()
                }
                Err(e) => Reply {
                    ok: false,
                    paused: false,
                    message: format!("{e}"),
                }
                .json(),
            },
        );
    Ok(CtlServer::unix(path, Access { gid }, handler)?)
}

/// The gid of the group named `name`.
fn group_id(name: &str) -> anyhow::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| anyhow::anyhow!("health.control_group {name:?} contains a NUL byte"))?;
    // SAFETY: getgrnam reads a valid C string; the returned entry is read
    // at once, before any other call that could overwrite it, on the one
    // thread that starts the recorder.
    let gr = unsafe { libc::getgrnam(c.as_ptr()) };
    if gr.is_null() {
        anyhow::bail!("health.control_group: no group named {name:?} on this system (add it, or leave the key empty)");
    }
    // SAFETY: non-null, pointing at the static entry getgrnam returned.
    Ok(unsafe { (*gr).gr_gid })
}
