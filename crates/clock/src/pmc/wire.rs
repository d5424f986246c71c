//! PTP management messages on the wire (IEEE 1588-2008 clause 15, with
//! linuxptp's `_NP` extensions), without I/O: encoding GET requests as
//! linuxptp's pmc does and decoding responses. Layouts follow linuxptp's
//! msg.h (`struct management_msg`), tlv.h (`struct management_tlv`,
//! `struct time_status_np`) and ds.h (the data sets); everything is
//! big-endian and packed.

use std::fmt;

use serde::Serialize;

/// `struct ptp_header` + `struct management_msg`: 34 + 14 bytes.
pub(crate) const MANAGEMENT_HEADER_LEN: usize = 48;
/// messageType MANAGEMENT.
const MESSAGE_MANAGEMENT: u8 = 0x0D;
/// versionPTP 2 (the minor version nibble stays 0, which every ptp4l accepts;
/// ptp4l before 3.0 rejected anything else).
const VERSION_PTP: u8 = 2;
/// controlField of management messages (`CTL_MANAGEMENT`).
const CONTROL_MANAGEMENT: u8 = 4;
/// logMessageInterval of management messages.
const LOG_INTERVAL_NONE: u8 = 0x7F;
/// tlvType MANAGEMENT.
const TLV_MANAGEMENT: u16 = 0x0001;
/// tlvType MANAGEMENT_ERROR_STATUS.
const TLV_MANAGEMENT_ERROR_STATUS: u16 = 0x0002;
/// actionField GET.
const ACTION_GET: u8 = 0;
/// actionField RESPONSE.
const ACTION_RESPONSE: u8 = 2;

/// The management ids this crate asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ManagementId {
    /// DEFAULT_DATA_SET (0x2000): the clock's own identity and settings.
    DefaultDataSet,
    /// CURRENT_DATA_SET (0x2001): stepsRemoved, offsetFromMaster, meanPathDelay.
    CurrentDataSet,
    /// PARENT_DATA_SET (0x2002): the parent port and the grandmaster.
    ParentDataSet,
    /// PORT_DATA_SET (0x2004): one answer per port, with its state.
    PortDataSet,
    /// TIME_STATUS_NP (0xC000, linuxptp): master offset, gmPresent, gmIdentity.
    TimeStatusNp,
}

impl ManagementId {
    /// The managementId on the wire.
    pub fn code(self) -> u16 {
        match self {
            ManagementId::DefaultDataSet => 0x2000,
            ManagementId::CurrentDataSet => 0x2001,
            ManagementId::ParentDataSet => 0x2002,
            ManagementId::PortDataSet => 0x2004,
            ManagementId::TimeStatusNp => 0xC000,
        }
    }

    /// The name pmc uses (`GET <name>`).
    pub fn name(self) -> &'static str {
        match self {
            ManagementId::DefaultDataSet => "DEFAULT_DATA_SET",
            ManagementId::CurrentDataSet => "CURRENT_DATA_SET",
            ManagementId::ParentDataSet => "PARENT_DATA_SET",
            ManagementId::PortDataSet => "PORT_DATA_SET",
            ManagementId::TimeStatusNp => "TIME_STATUS_NP",
        }
    }

    /// The size of the id's data on the wire. pmc (since linuxptp 2.0)
    /// sends GETs with a zero-filled data field of this size, as IEEE 1588
    /// asks; ptp4l accepts both that and an empty one.
    pub(crate) fn data_len(self) -> usize {
        match self {
            ManagementId::DefaultDataSet => 20,
            ManagementId::CurrentDataSet => 18,
            ManagementId::ParentDataSet => 32,
            ManagementId::PortDataSet => 26,
            ManagementId::TimeStatusNp => 50,
        }
    }
}

impl fmt::Display for ManagementId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Encodes a GET of `id` as pmc does with `-u -b 0`: zero source clock
/// identity with `port_number` (pmc uses its pid), target all ports of all
/// clocks (all-ones), boundary hops 0, a zero-filled data field.
pub(crate) fn encode_get(
    domain: u8,
    sequence_id: u16,
    port_number: u16,
    id: ManagementId,
) -> Vec<u8> {
    let data_len = id.data_len();
    let total = MANAGEMENT_HEADER_LEN + 6 + data_len;
    let mut m = vec![0u8; total];
    m[0] = MESSAGE_MANAGEMENT; // transportSpecific 0 | messageType
    m[1] = VERSION_PTP;
    m[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    m[4] = domain;
    // 5 minorSdoId, 6..8 flagField, 8..16 correctionField, 16..20 reserved,
    // 20..28 sourcePortIdentity.clockIdentity: all zero.
    m[28..30].copy_from_slice(&port_number.to_be_bytes());
    m[30..32].copy_from_slice(&sequence_id.to_be_bytes());
    m[32] = CONTROL_MANAGEMENT;
    m[33] = LOG_INTERVAL_NONE;
    m[34..44].fill(0xFF); // targetPortIdentity: every clock, every port
                          // 44 startingBoundaryHops 0, 45 boundaryHops 0, 46 actionField GET, 47 reserved
    m[46] = ACTION_GET;
    m[48..50].copy_from_slice(&TLV_MANAGEMENT.to_be_bytes());
    m[50..52].copy_from_slice(&((2 + data_len) as u16).to_be_bytes());
    m[52..54].copy_from_slice(&id.code().to_be_bytes());
    m
}

/// A decoded management RESPONSE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply<'a> {
    pub(crate) sequence_id: u16,
    pub(crate) source: PortIdentity,
    pub(crate) body: ReplyBody<'a>,
}

/// The TLV of a RESPONSE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplyBody<'a> {
    /// A MANAGEMENT TLV: the id and its data.
    Data { id: u16, data: &'a [u8] },
    /// A MANAGEMENT_ERROR_STATUS TLV.
    Error {
        id: u16,
        error: u16,
        display: String,
    },
}

impl ReplyBody<'_> {
    pub(crate) fn id(&self) -> u16 {
        match self {
            ReplyBody::Data { id, .. } | ReplyBody::Error { id, .. } => *id,
        }
    }
}

/// Why a datagram is not a management response this crate understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct DecodeError(pub(crate) String);

fn bad<T>(reason: impl Into<String>) -> Result<T, DecodeError> {
    Err(DecodeError(reason.into()))
}

/// Decodes a management message. Messages with another actionField than
/// RESPONSE decode to `Ok(None)` (nothing this client waits for).
pub(crate) fn decode(buf: &[u8]) -> Result<Option<Reply<'_>>, DecodeError> {
    if buf.len() < MANAGEMENT_HEADER_LEN {
        return bad(format!(
            "{} bytes, shorter than a management header ({MANAGEMENT_HEADER_LEN})",
            buf.len()
        ));
    }
    if buf[0] & 0x0F != MESSAGE_MANAGEMENT {
        return bad(format!(
            "messageType {:#x}, not MANAGEMENT (0xd)",
            buf[0] & 0x0F
        ));
    }
    if buf[1] & 0x0F != VERSION_PTP {
        return bad(format!("versionPTP {}, not 2", buf[1] & 0x0F));
    }
    let length = usize::from(be16(buf, 2));
    if length < MANAGEMENT_HEADER_LEN || length > buf.len() {
        return bad(format!(
            "messageLength {length} does not fit the {} bytes received",
            buf.len()
        ));
    }
    let msg = &buf[..length];
    if msg[46] & 0x0F != ACTION_RESPONSE {
        return Ok(None);
    }
    let sequence_id = be16(msg, 30);
    let source = PortIdentity::from_bytes(&msg[20..30]);
    let tlv = &msg[MANAGEMENT_HEADER_LEN..];
    if tlv.len() < 6 {
        return bad("RESPONSE without a management TLV");
    }
    let tlv_type = be16(tlv, 0);
    let tlv_len = usize::from(be16(tlv, 2));
    if tlv_len < 2 || 4 + tlv_len > tlv.len() {
        return bad(format!(
            "TLV length {tlv_len} does not fit the {} bytes after the header",
            tlv.len()
        ));
    }
    let value = &tlv[4..4 + tlv_len];
    let body = match tlv_type {
        TLV_MANAGEMENT => ReplyBody::Data {
            id: be16(value, 0),
            data: &value[2..],
        },
        TLV_MANAGEMENT_ERROR_STATUS => {
            // managementErrorId, managementId, 4 reserved, displayData (PTPText).
            if value.len() < 8 {
                return bad(format!("MANAGEMENT_ERROR_STATUS of {} bytes", value.len()));
            }
            let display = value
                .get(8)
                .map(|&n| {
                    let text = value.get(9..9 + usize::from(n)).unwrap_or(&value[9..]);
                    String::from_utf8_lossy(text).into_owned()
                })
                .unwrap_or_default();
            ReplyBody::Error {
                error: be16(value, 0),
                id: be16(value, 2),
                display,
            }
        }
        other => return bad(format!("TLV type {other:#06x}, not MANAGEMENT")),
    };
    Ok(Some(Reply {
        sequence_id,
        source,
        body,
    }))
}

/// The name pmc prints for a managementErrorId.
pub(crate) fn error_name(error: u16) -> String {
    match error {
        0x0001 => "RESPONSE_TOO_BIG".to_string(),
        0x0002 => "NO_SUCH_ID".to_string(),
        0x0003 => "WRONG_LENGTH".to_string(),
        0x0004 => "WRONG_VALUE".to_string(),
        0x0005 => "NOT_SETABLE".to_string(),
        0x0006 => "NOT_SUPPORTED".to_string(),
        0xFFFE => "GENERAL_ERROR".to_string(),
        other => format!("error {other:#06x}"),
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Checks a data field's length before the fixed-offset reads below.
fn need(data: &[u8], id: ManagementId) -> Result<(), DecodeError> {
    if data.len() < id.data_len() {
        return bad(format!(
            "{id} data of {} bytes, expected {}",
            data.len(),
            id.data_len()
        ));
    }
    Ok(())
}

/// A PTP clockIdentity (EUI-64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClockIdentity(pub [u8; 8]);

impl ClockIdentity {
    fn from_bytes(b: &[u8]) -> ClockIdentity {
        let mut id = [0u8; 8];
        id.copy_from_slice(&b[..8]);
        ClockIdentity(id)
    }
}

/// As pmc prints it (linuxptp `cid2str`): `xxxxxx.xxxx.xxxxxx`.
impl fmt::Display for ClockIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}{:02x}{:02x}.{:02x}{:02x}.{:02x}{:02x}{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
        )
    }
}

impl Serialize for ClockIdentity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A PTP portIdentity: clock identity and port number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortIdentity {
    /// The clock the port belongs to.
    pub clock: ClockIdentity,
    /// The port number (1-based; 0 is ptp4l's management port).
    pub port: u16,
}

impl PortIdentity {
    fn from_bytes(b: &[u8]) -> PortIdentity {
        PortIdentity {
            clock: ClockIdentity::from_bytes(b),
            port: be16(b, 8),
        }
    }
}

/// As pmc prints it (linuxptp `pid2str`): `xxxxxx.xxxx.xxxxxx-N`.
impl fmt::Display for PortIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.clock, self.port)
    }
}

impl Serialize for PortIdentity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A port state (IEEE 1588 portState; linuxptp's `enum port_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortState {
    /// 1: starting up.
    Initializing,
    /// 2: a fault stopped the port.
    Faulty,
    /// 3: administratively disabled.
    Disabled,
    /// 4: waiting for announce messages.
    Listening,
    /// 5: about to become master.
    PreMaster,
    /// 6: sending time.
    Master,
    /// 7: neither master nor slave (a better path exists).
    Passive,
    /// 8: a master is chosen and the servo is not locked yet (a servo
    /// that never locks, e.g. with `free_running 1`, stays here).
    Uncalibrated,
    /// 9: synchronised to the master, servo locked.
    Slave,
    /// 10: linuxptp's grandmaster state.
    GrandMaster,
    /// Any other value.
    Unknown(u8),
}

impl PortState {
    /// From the wire value.
    pub fn from_u8(v: u8) -> PortState {
        match v {
            1 => PortState::Initializing,
            2 => PortState::Faulty,
            3 => PortState::Disabled,
            4 => PortState::Listening,
            5 => PortState::PreMaster,
            6 => PortState::Master,
            7 => PortState::Passive,
            8 => PortState::Uncalibrated,
            9 => PortState::Slave,
            10 => PortState::GrandMaster,
            other => PortState::Unknown(other),
        }
    }
}

/// As pmc prints it (linuxptp `ps_str`): `SLAVE`, `UNCALIBRATED`, ...
impl fmt::Display for PortState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            PortState::Initializing => "INITIALIZING",
            PortState::Faulty => "FAULTY",
            PortState::Disabled => "DISABLED",
            PortState::Listening => "LISTENING",
            PortState::PreMaster => "PRE_MASTER",
            PortState::Master => "MASTER",
            PortState::Passive => "PASSIVE",
            PortState::Uncalibrated => "UNCALIBRATED",
            PortState::Slave => "SLAVE",
            PortState::GrandMaster => "GRAND_MASTER",
            PortState::Unknown(v) => return write!(f, "UNKNOWN({v})"),
        };
        f.write_str(s)
    }
}

impl Serialize for PortState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// TIME_STATUS_NP (linuxptp `struct time_status_np`, 50 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimeStatusNp {
    /// The last measured offset of this clock from its master, ns (the
    /// `master offset` ptp4l logs).
    pub master_offset_ns: i64,
    /// Ingress time of the last sync, ns on the local (PHC) clock.
    pub ingress_time_ns: i64,
    /// cumulativeScaledRateOffset (802.1AS), (ratio - 1) * 2^41.
    pub cumulative_scaled_rate_offset: i32,
    /// scaledLastGmPhaseChange (802.1AS).
    pub scaled_last_gm_phase_change: i32,
    /// gmTimeBaseIndicator (802.1AS).
    pub gm_time_base_indicator: u16,
    /// Whether a grandmaster other than this clock is present.
    pub gm_present: bool,
    /// The grandmaster's identity (this clock's own when none is present).
    pub gm_identity: ClockIdentity,
}

impl TimeStatusNp {
    pub(crate) fn parse(d: &[u8]) -> Result<TimeStatusNp, DecodeError> {
        need(d, ManagementId::TimeStatusNp)?;
        // 26..38 lastGmPhaseChange (ScaledNs: u16 msb, u64 lsb, u16 fraction).
        Ok(TimeStatusNp {
            master_offset_ns: be64(d, 0) as i64,
            ingress_time_ns: be64(d, 8) as i64,
            cumulative_scaled_rate_offset: be32(d, 16) as i32,
            scaled_last_gm_phase_change: be32(d, 20) as i32,
            gm_time_base_indicator: be16(d, 24),
            gm_present: be32(d, 38) != 0,
            gm_identity: ClockIdentity::from_bytes(&d[42..50]),
        })
    }
}

/// PORT_DATA_SET (linuxptp `struct portDS`, 26 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PortDataSet {
    /// The port.
    pub port_identity: PortIdentity,
    /// Its state.
    pub port_state: PortState,
    /// log2 of the minimum delay request interval, s.
    pub log_min_delay_req_interval: i8,
    /// peerMeanPathDelay (P2P only), ns.
    pub peer_mean_path_delay_ns: i64,
    /// log2 of the announce interval, s.
    pub log_announce_interval: i8,
    /// Announce intervals without announce before the master is lost.
    pub announce_receipt_timeout: u8,
    /// log2 of the sync interval, s.
    pub log_sync_interval: i8,
    /// 1 E2E, 2 P2P, 0xFE disabled.
    pub delay_mechanism: u8,
}

impl PortDataSet {
    pub(crate) fn parse(d: &[u8]) -> Result<PortDataSet, DecodeError> {
        need(d, ManagementId::PortDataSet)?;
        Ok(PortDataSet {
            port_identity: PortIdentity::from_bytes(&d[0..10]),
            port_state: PortState::from_u8(d[10]),
            log_min_delay_req_interval: d[11] as i8,
            peer_mean_path_delay_ns: (be64(d, 12) as i64) >> 16,
            log_announce_interval: d[20] as i8,
            announce_receipt_timeout: d[21],
            log_sync_interval: d[22] as i8,
            delay_mechanism: d[23],
        })
    }
}

/// CURRENT_DATA_SET (`struct currentDS`, 18 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurrentDataSet {
    /// Boundary clocks between this clock and the grandmaster, plus one.
    pub steps_removed: u16,
    /// offsetFromMaster, ns (TimeInterval: scaled ns / 2^16).
    pub offset_from_master_ns: f64,
    /// meanPathDelay, ns.
    pub mean_path_delay_ns: f64,
}

impl CurrentDataSet {
    pub(crate) fn parse(d: &[u8]) -> Result<CurrentDataSet, DecodeError> {
        need(d, ManagementId::CurrentDataSet)?;
        Ok(CurrentDataSet {
            steps_removed: be16(d, 0),
            offset_from_master_ns: time_interval_ns(be64(d, 2)),
            mean_path_delay_ns: time_interval_ns(be64(d, 10)),
        })
    }
}

/// A TimeInterval (ns << 16, signed) in ns, as pmc prints it (`%.1f` of
/// value / 65536).
fn time_interval_ns(raw: u64) -> f64 {
    raw as i64 as f64 / 65536.0
}

/// PARENT_DATA_SET (`struct parentDS`, 32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParentDataSet {
    /// The master port this clock follows (its own port 0 with no master).
    pub parent_port_identity: PortIdentity,
    /// grandmasterPriority1.
    pub grandmaster_priority1: u8,
    /// grandmasterClockQuality.clockClass.
    pub grandmaster_clock_class: u8,
    /// grandmasterClockQuality.clockAccuracy.
    pub grandmaster_clock_accuracy: u8,
    /// grandmasterPriority2.
    pub grandmaster_priority2: u8,
    /// grandmasterIdentity.
    pub grandmaster_identity: ClockIdentity,
}

impl ParentDataSet {
    pub(crate) fn parse(d: &[u8]) -> Result<ParentDataSet, DecodeError> {
        need(d, ManagementId::ParentDataSet)?;
        // 10 parentStats, 11 reserved, 12..14 observedParentOffsetScaledLogVariance,
        // 14..18 observedParentClockPhaseChangeRate, 18 priority1,
        // 19..23 clockQuality (class, accuracy, variance), 23 priority2, 24..32 gm.
        Ok(ParentDataSet {
            parent_port_identity: PortIdentity::from_bytes(&d[0..10]),
            grandmaster_priority1: d[18],
            grandmaster_clock_class: d[19],
            grandmaster_clock_accuracy: d[20],
            grandmaster_priority2: d[23],
            grandmaster_identity: ClockIdentity::from_bytes(&d[24..32]),
        })
    }
}

/// DEFAULT_DATA_SET (`struct defaultDS`, 20 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DefaultDataSet {
    /// Whether the clock sends follow-up messages.
    pub two_step: bool,
    /// Whether the clock can only be a slave.
    pub slave_only: bool,
    /// How many PTP ports the clock has.
    pub number_ports: u16,
    /// priority1.
    pub priority1: u8,
    /// clockQuality.clockClass.
    pub clock_class: u8,
    /// priority2.
    pub priority2: u8,
    /// The clock's identity.
    pub clock_identity: ClockIdentity,
    /// domainNumber.
    pub domain_number: u8,
}

impl DefaultDataSet {
    pub(crate) fn parse(d: &[u8]) -> Result<DefaultDataSet, DecodeError> {
        need(d, ManagementId::DefaultDataSet)?;
        // 0 flags (bit 0 twoStep, bit 1 slaveOnly), 1 reserved, 2..4 numberPorts,
        // 4 priority1, 5..9 clockQuality, 9 priority2, 10..18 identity, 18 domain.
        Ok(DefaultDataSet {
            two_step: d[0] & 1 != 0,
            slave_only: d[0] & 2 != 0,
            number_ports: be16(d, 2),
            priority1: d[4],
            clock_class: d[5],
            priority2: d[9],
            clock_identity: ClockIdentity::from_bytes(&d[10..18]),
            domain_number: d[18],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frames of a fixture file by name (see tests/data/generate.sh).
    fn fixture(text: &str, name: &str) -> Vec<u8> {
        let line = text
            .lines()
            .find(|l| l.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in fixture"));
        let mut parts = line.split(' ');
        let _ = parts.next();
        let len: usize = parts.next().unwrap().parse().unwrap();
        let hex = parts.next().unwrap();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(bytes.len(), len);
        bytes
    }

    const REQUESTS: &str = include_str!("../../tests/data/pmc-3.1.1-requests.txt");
    const RESPONSES: &str = include_str!("../../tests/data/ptp4l-3.1.1-responses.txt");

    fn data_of(name: &str, id: ManagementId) -> Vec<u8> {
        let frame = fixture(RESPONSES, name);
        let reply = decode(&frame).unwrap().unwrap();
        match reply.body {
            ReplyBody::Data { id: got, data } => {
                assert_eq!(got, id.code());
                data.to_vec()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn gets_are_byte_identical_to_what_pmc_sends() {
        let ids = [
            ManagementId::TimeStatusNp,
            ManagementId::PortDataSet,
            ManagementId::DefaultDataSet,
            ManagementId::CurrentDataSet,
            ManagementId::ParentDataSet,
        ];
        for (seq, id) in ids.into_iter().enumerate() {
            let ours = encode_get(0, seq as u16, 0x2136, id);
            assert_eq!(ours, fixture(REQUESTS, id.name()), "GET {id}");
        }
    }

    #[test]
    fn get_layout_by_hand() {
        let m = encode_get(24, 0xABCD, 7, ManagementId::CurrentDataSet);
        assert_eq!(m.len(), 48 + 6 + 18);
        assert_eq!(m[0], 0x0D);
        assert_eq!(m[1], 0x02);
        assert_eq!(&m[2..4], &[0, 72]);
        assert_eq!(m[4], 24, "domainNumber");
        assert_eq!(&m[20..28], &[0; 8], "source clockIdentity");
        assert_eq!(&m[28..30], &[0, 7], "source portNumber");
        assert_eq!(&m[30..32], &[0xAB, 0xCD], "sequenceId");
        assert_eq!(m[32], 4, "controlField");
        assert_eq!(m[33], 0x7F, "logMessageInterval");
        assert_eq!(&m[34..44], &[0xFF; 10], "targetPortIdentity");
        assert_eq!(&m[44..48], &[0, 0, 0, 0], "hops, GET, reserved");
        assert_eq!(&m[48..54], &[0x00, 0x01, 0x00, 20, 0x20, 0x01], "TLV head");
        assert!(m[54..].iter().all(|&b| b == 0));
    }

    #[test]
    fn time_status_np_from_a_real_ptp4l() {
        let frame = fixture(RESPONSES, "TIME_STATUS_NP");
        let reply = decode(&frame).unwrap().unwrap();
        assert_eq!(reply.sequence_id, 0x0100);
        assert_eq!(reply.source.to_string(), "a2d404.fffe.89ebae-0");
        let ts =
            TimeStatusNp::parse(&data_of("TIME_STATUS_NP", ManagementId::TimeStatusNp)).unwrap();
        assert_eq!(ts.master_offset_ns, -747);
        assert_eq!(ts.ingress_time_ns, 0x18ed_7c32_3951_dcbe);
        assert_eq!(ts.cumulative_scaled_rate_offset, 0);
        assert!(ts.gm_present);
        assert_eq!(ts.gm_identity.to_string(), "7edacc.fffe.fe18d1");
    }

    #[test]
    fn port_data_set_from_a_real_ptp4l() {
        let frame = fixture(RESPONSES, "PORT_DATA_SET");
        let reply = decode(&frame).unwrap().unwrap();
        assert_eq!(reply.source.port, 1, "answered by port 1");
        let p = PortDataSet::parse(&data_of("PORT_DATA_SET", ManagementId::PortDataSet)).unwrap();
        assert_eq!(p.port_identity.to_string(), "a2d404.fffe.89ebae-1");
        assert_eq!(p.port_state, PortState::Uncalibrated);
        assert_eq!(p.port_state.to_string(), "UNCALIBRATED");
        assert_eq!(p.log_min_delay_req_interval, 0);
        assert_eq!(p.peer_mean_path_delay_ns, 0);
        assert_eq!(p.log_announce_interval, 1);
        assert_eq!(p.announce_receipt_timeout, 3);
        assert_eq!(p.log_sync_interval, 0);
        assert_eq!(p.delay_mechanism, 1);
    }

    #[test]
    fn current_parent_default_from_a_real_ptp4l() {
        let c = CurrentDataSet::parse(&data_of("CURRENT_DATA_SET", ManagementId::CurrentDataSet))
            .unwrap();
        assert_eq!(c.steps_removed, 1);
        assert_eq!(c.offset_from_master_ns, 474.0);
        assert_eq!(c.mean_path_delay_ns, 1748.0);

        let p =
            ParentDataSet::parse(&data_of("PARENT_DATA_SET", ManagementId::ParentDataSet)).unwrap();
        assert_eq!(p.parent_port_identity.to_string(), "7edacc.fffe.fe18d1-1");
        assert_eq!(p.grandmaster_priority1, 1);
        assert_eq!(p.grandmaster_clock_class, 248);
        assert_eq!(p.grandmaster_clock_accuracy, 0xFE);
        assert_eq!(p.grandmaster_priority2, 128);
        assert_eq!(p.grandmaster_identity.to_string(), "7edacc.fffe.fe18d1");

        let d = DefaultDataSet::parse(&data_of("DEFAULT_DATA_SET", ManagementId::DefaultDataSet))
            .unwrap();
        assert!(d.two_step && d.slave_only);
        assert_eq!(d.number_ports, 1);
        assert_eq!(d.priority1, 128);
        assert_eq!(d.clock_class, 255);
        assert_eq!(d.clock_identity.to_string(), "a2d404.fffe.89ebae");
        assert_eq!(d.domain_number, 0);
    }

    #[test]
    fn error_status_from_a_real_ptp4l() {
        let frame = fixture(RESPONSES, "BOGUS_0xC00F");
        let reply = decode(&frame).unwrap().unwrap();
        assert_eq!(reply.sequence_id, 0x0105);
        assert_eq!(
            reply.body,
            ReplyBody::Error {
                id: 0xC00F,
                error: 2,
                display: String::new()
            }
        );
        assert_eq!(error_name(2), "NO_SUCH_ID");
    }

    /// A response built by hand, field by field, with a negative offset,
    /// a display text on an error, and the decoder's refusals.
    #[test]
    fn hand_built_frames() {
        let mut m = encode_get(0, 42, 1, ManagementId::TimeStatusNp);
        m[20..28].copy_from_slice(&[0x00, 0x11, 0x22, 0xFF, 0xFE, 0x33, 0x44, 0x55]);
        m[28..30].copy_from_slice(&[0, 0]);
        m[46] = ACTION_RESPONSE;
        let d = &mut m[54..];
        d[0..8].copy_from_slice(&(-123_456i64).to_be_bytes());
        d[8..16].copy_from_slice(&1_700_000_000_000_000_000i64.to_be_bytes());
        d[16..20].copy_from_slice(&(-5i32).to_be_bytes());
        d[38..42].copy_from_slice(&1i32.to_be_bytes());
        d[42..50].copy_from_slice(&[0xAA, 0xBB, 0xCC, 0xFF, 0xFE, 0x01, 0x02, 0x03]);
        let reply = decode(&m).unwrap().unwrap();
        assert_eq!(reply.sequence_id, 42);
        assert_eq!(reply.source.to_string(), "001122.fffe.334455-0");
        let ReplyBody::Data { id, data } = reply.body else {
            panic!("not data")
        };
        assert_eq!(id, 0xC000);
        let ts = TimeStatusNp::parse(data).unwrap();
        assert_eq!(ts.master_offset_ns, -123_456);
        assert_eq!(ts.ingress_time_ns, 1_700_000_000_000_000_000);
        assert_eq!(ts.cumulative_scaled_rate_offset, -5);
        assert!(ts.gm_present);
        assert_eq!(ts.gm_identity.to_string(), "aabbcc.fffe.010203");

        // An error status with displayData "busy".
        let mut e = m[..48].to_vec();
        e.extend_from_slice(&[0x00, 0x02, 0x00, 13]);
        e.extend_from_slice(&[0x00, 0x06, 0x20, 0x04, 0, 0, 0, 0, 4]);
        e.extend_from_slice(b"busy");
        let len = e.len() as u16;
        e[2..4].copy_from_slice(&len.to_be_bytes());
        let reply = decode(&e).unwrap().unwrap();
        assert_eq!(
            reply.body,
            ReplyBody::Error {
                id: 0x2004,
                error: 6,
                display: "busy".into()
            }
        );

        // A GET (our own request echoed) is not a response.
        assert_eq!(
            decode(&encode_get(0, 1, 1, ManagementId::PortDataSet)).unwrap(),
            None
        );
        // Refusals.
        assert!(decode(&m[..40]).is_err());
        let mut wrong = m.clone();
        wrong[0] = 0x00; // a Sync
        assert!(decode(&wrong).unwrap_err().0.contains("not MANAGEMENT"));
        let mut wrong = m.clone();
        wrong[2..4].copy_from_slice(&2000u16.to_be_bytes());
        assert!(decode(&wrong).unwrap_err().0.contains("messageLength"));
        let mut wrong = m.clone();
        wrong[50..52].copy_from_slice(&200u16.to_be_bytes());
        assert!(decode(&wrong).unwrap_err().0.contains("TLV length"));
        assert!(TimeStatusNp::parse(&[0; 49]).is_err());
    }

    #[test]
    fn identities_and_states_print_like_pmc() {
        let id = ClockIdentity([0x7e, 0xda, 0xcc, 0xff, 0xfe, 0xfe, 0x18, 0xd1]);
        assert_eq!(id.to_string(), "7edacc.fffe.fe18d1");
        let names: Vec<String> = (1..=10)
            .map(|v| PortState::from_u8(v).to_string())
            .collect();
        assert_eq!(
            names,
            [
                "INITIALIZING",
                "FAULTY",
                "DISABLED",
                "LISTENING",
                "PRE_MASTER",
                "MASTER",
                "PASSIVE",
                "UNCALIBRATED",
                "SLAVE",
                "GRAND_MASTER"
            ]
        );
        assert_eq!(PortState::from_u8(99).to_string(), "UNKNOWN(99)");
    }
}
