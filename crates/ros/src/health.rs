//! What the recorder says about itself on ROS 2: the status snapshot's
//! diagnostics for `/diagnostics` (`diagnostic_msgs/msg/DiagnosticArray`)
//! and its JSON for `/edgerec/status` (`std_msgs/msg/String`), both once a
//! second. The binary hands a [`HealthFeed`] to the ROS source, which
//! publishes what it returns; edgerec-ros does not know edgerec-health.

use std::sync::Arc;

/// One diagnostic status, owned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diagnostic {
    /// `diagnostic_msgs/DiagnosticStatus` level: OK 0, WARN 1, ERROR 2,
    /// STALE 3.
    pub level: u8,
    /// What it is about (`edgerec: storage`).
    pub name: String,
    /// One line.
    pub message: String,
    /// The device or file.
    pub hardware_id: String,
    /// Key/value pairs.
    pub values: Vec<(String, String)>,
}

/// The latest status: its diagnostics and its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthReport {
    /// One status per subsystem and per source.
    pub diagnostics: Vec<Diagnostic>,
    /// The status snapshot as JSON.
    pub status_json: String,
}

/// Returns the latest report, `None` before the first.
pub type HealthFeed = Arc<dyn Fn() -> Option<HealthReport> + Send + Sync>;

/// The topics and types the reports go out on.
pub const DIAGNOSTICS_TOPIC: &str = "/diagnostics";
/// See [`DIAGNOSTICS_TOPIC`].
pub const STATUS_TOPIC: &str = "/edgerec/status";

impl HealthReport {
    /// The `DiagnosticArray` CDR stamped `stamp_ns`.
    pub fn diagnostic_array(&self, stamp_ns: u64) -> Vec<u8> {
        let statuses: Vec<crate::diagnostics::DiagnosticStatus<'_>> = self
            .diagnostics
            .iter()
            .map(|d| crate::diagnostics::DiagnosticStatus {
                level: d.level,
                name: &d.name,
                message: &d.message,
                hardware_id: &d.hardware_id,
                values: &d.values,
            })
            .collect();
        let stamp = crate::diagnostics::Time {
            sec: (stamp_ns / 1_000_000_000).min(i32::MAX as u64) as i32,
            nanosec: (stamp_ns % 1_000_000_000) as u32,
        };
        crate::diagnostics::diagnostic_array(stamp, "", &statuses)
    }

    /// The `std_msgs/String` CDR of the JSON.
    pub fn status_string(&self) -> Vec<u8> {
        crate::diagnostics::status_string(&self.status_json)
    }
}
