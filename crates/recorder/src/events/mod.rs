//! Recording the right moments: in `triggered` and `mixed` mode, clip
//! channels go to a pre-roll ring in RAM instead of (in `mixed`, for the
//! channels not recorded all the time) the continuous segments; rules over
//! decoded fields, `edgerec ctl trigger` and the other triggers open event
//! clips that start `pre` before the event and end `post` after it.
//!
//! - [`ring`]: the pre-roll ring (sealed, compressed blocks per channel,
//!   whole GOPs for video, bounded by `triggers.memory_budget`);
//! - [`rules`]: the `[[trigger]]` rules, compiled against each topic's
//!   message definition once the channel appears, fed every message;
//! - [`clip`]: one clip's bag directory on disk;
//! - [`budget`]: the clips' own disk budget (`triggers.disk_budget`);
//! - [`stage`]: the `events` stage thread that ties them together, fed
//!   by the chunker through a [`Lane`] that never blocks it.

pub mod budget;
pub mod clip;
pub mod lane;
pub mod plan;
pub mod ring;
pub mod rules;
pub mod stage;
pub mod status;

pub use clip::{ClipError, EventInfo};
pub use lane::Lane;
pub use plan::{RulePlan, TriggerPlan};
pub use ring::RingStats;
pub use status::{EventSummary, EventsStatus};
