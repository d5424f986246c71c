//! The topics under the vehicle's prefix.

/// Every topic the link publishes or subscribes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    /// The prefix (`edgerec/<vehicle_id>`), no trailing `/`.
    pub prefix: String,
    /// Retained: online, or the last will's offline.
    pub connection: String,
    /// Retained: the recorder's status snapshot.
    pub status: String,
    /// The fleet's commands (subscribed).
    pub cmd: String,
    /// The answers to them.
    pub reply: String,
    /// Alerts raised and cleared.
    pub alerts: String,
    /// Warnings and errors.
    pub log: String,
}

impl Topics {
    /// The topics under `prefix` (validated by the configuration: no
    /// wildcard, no empty level).
    pub fn new(prefix: &str) -> Topics {
        let prefix = prefix.trim_end_matches('/').to_owned();
        Topics {
            connection: format!("{prefix}/connection"),
            status: format!("{prefix}/status"),
            cmd: format!("{prefix}/cmd"),
            reply: format!("{prefix}/reply"),
            alerts: format!("{prefix}/alerts"),
            log: format!("{prefix}/log"),
            prefix,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Topics;

    #[test]
    fn topics_sit_under_the_prefix() {
        let t = Topics::new("edgerec/robot-7");
        assert_eq!(t.connection, "edgerec/robot-7/connection");
        assert_eq!(t.status, "edgerec/robot-7/status");
    }
}
