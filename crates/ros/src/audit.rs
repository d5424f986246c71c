//! The audit trail of the operator's commands: every request that reaches
//! a command, from every surface (the control socket, the ROS 2
//! services), carried out or refused, with who asked. Each goes to the
//! log under the `edgerec::audit` target with structured fields (the
//! journal keeps them), and to the sink the binary sets on the
//! [`ControlSlot`](crate::control::ControlSlot), which writes the ones
//! that change something into the recording.

use std::sync::Arc;

use crate::control::{Command, Reply};
use crate::rate_limit::Requester;

/// Where a request came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The control socket (`edgerec ctl`, `edgerec offload`).
    ControlSocket,
    /// rosbag2's recorder services and `~/trigger`.
    RosServices,
    /// The fleet link (MQTT over TLS, `edgerec-remote`).
    FleetLink,
}

impl Surface {
    /// Its name in the log and the recording.
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::ControlSocket => "control socket",
            Surface::RosServices => "ros services",
            Surface::FleetLink => "fleet link",
        }
    }
}

/// One request, as the audit trail takes it.
#[derive(Debug, Clone, Copy)]
pub struct Audited<'a> {
    /// Where it came in.
    pub surface: Surface,
    /// Who asked, as the surface knows it (the kernel's word for the
    /// socket, the calling writer's GUID for the services).
    pub who: &'a Requester,
    /// What.
    pub command: &'a Command,
    /// What came of it: carried out (`ok`), or refused and why.
    pub reply: &'a Reply,
}

/// Where the binary sends each audited request besides the log.
pub type AuditSink = Arc<dyn Fn(&Audited<'_>) + Send + Sync>;

/// Logs `a` under the `edgerec::audit` target.
pub fn log(a: &Audited<'_>) {
    let (uid, user, pid, client) = match a.who {
        Requester::Local { uid, pid, user } => (
            i64::from(*uid),
            user.as_deref().unwrap_or(""),
            i64::from(*pid),
            "",
        ),
        Requester::RosClient { id } => (-1, "", -1, id.as_str()),
        Requester::Fleet { command_id, .. } => (-1, "", -1, command_id.as_str()),
        Requester::Unknown => (-1, "", -1, ""),
    };
    tracing::info!(
        target: "edgerec::audit",
        surface = a.surface.as_str(),
        uid,
        user,
        pid,
        client,
        command = %a.command,
        accepted = a.reply.ok,
        result = %a.reply.message,
        "{} ({}): {}: {}",
        a.who,
        a.surface.as_str(),
        a.command.verb(),
        if a.reply.ok { "done" } else { "refused" }
    );
}
