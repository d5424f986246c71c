//! ROS 2 services as rmw_cyclonedds puts them on DDS, for the recorder
//! services edgerec offers: rosbag2's `~/pause`, `~/resume`, `~/is_paused`
//! and `~/split_bagfile`, and edgerec's own `~/trigger`
//! (`std_srvs/srv/Trigger`). A service is two DDS topics, `rq/<service>Request`
//! read by the server and `rr/<service>Reply` written by it; every sample
//! on either is the encapsulation header, a 16-byte [`RequestHeader`] the
//! reply echoes, then the request or reply struct (every request here is
//! empty: one dummy byte).
//!
//! ```
//! use edgerec_ros::services::{encode_request, parse_request, encode_response};
//! use edgerec_ros::services::{RequestHeader, Response, ServiceKind};
//!
//! let header = RequestHeader { client: 0x1234, sequence: 7 };
//! let request = encode_request(ServiceKind::IsPaused, header);
//! let parsed = parse_request(ServiceKind::IsPaused, &request).unwrap();
//! assert_eq!(parsed.header, header);
//! let reply = encode_response(ServiceKind::IsPaused, parsed.header, &Response::IsPaused { paused: true });
//! assert_eq!(reply.unwrap().len(), 4 + 16 + 1);
//! ```

// What rmw_cyclonedds does (ros2/rmw_cyclonedds `rmw_cyclonedds_cpp/src`,
// read through the search index at rmw_node.cpp 0033193, Serialization.cpp
// 00806e6, serdata.cpp 010d0ed and serdata.hpp 0c8072d; the older versions
// search turned up frame the same way):
// - serdata.hpp: `struct cdds_request_header { uint64_t guid; int64_t seq; }`.
// - Serialization.cpp, `CDRWriter::serialize_top_level(cursor, const
//   cdds_request_wrapper_t &)`: after the 4-byte encapsulation header it
//   puts the 8 bytes of `guid`, then the 8 of `seq` (native order, so
//   little-endian under the `00 01` header), then the struct, alignment
//   counted from the end of the encapsulation header. The header is 16
//   bytes at offset 0, so the struct aligns as it would alone. serdata.cpp
//   reads it back the same way (`ser >> wrap->header.guid; ser >>
//   wrap->header.seq;`). Requests and replies both go through the wrapper
//   (`rmw_init_cs` makes both sertypes with `is_request_header = true`).
// - rmw_node.cpp, `rmw_send_request`: `header.guid` is the client's request
//   writer's instance handle (`pubiid`, a number, not a GUID despite the
//   name), `header.seq` a per-process counter. `rmw_take_response` keeps
//   only replies whose `guid` is its own `pubiid` (`srcfilter`) and rcl
//   matches `seq`, so a reply echoes both unchanged. `rmw_send_response`
//   first waits up to 100 ms for the client's reply reader to match, found
//   by `clientid=` in the client's USER_DATA (see `user_data`).
// - An empty struct is the one member rosidl gives it, `uint8
//   structure_needs_at_least_one_member` (rosbags does the same).
//
// Types, from ros2/rosbag2 rosbag2_interfaces/srv as Iron and Jazzy ship
// them: Pause, Resume and SplitBagfile are `---` (empty both ways),
// IsPaused is `---` / `bool paused`. The recorder got these services for
// Iron (PR 1115 split_bagfile, PR 1131 pause, resume, is_paused); the
// Humble backport of 1131 (PR 1453) was closed for breaking ABI, so a
// Humble `ros2 bag record` has no pause services (whether split_bagfile
// reached Humble is not confirmed), though Humble's rosbag2_interfaces has
// Pause, Resume and IsPaused for the player. rosbag2 on rolling later added
// request fields to Resume and SplitBagfile (`resume_time`, `split_time`,
// ...); such a request is refused as `CdrError::Trailing`.
// std_srvs/srv/Trigger is `---` / `bool success`, `string message`.

use std::fmt::Write as _;

use edgerec_format::cdr::CdrWriter;

use crate::cdr_reader::{CdrError, CdrReader};
use crate::control::Command;
use crate::graph::Gid;
use crate::names;

/// Bytes of the request header after the encapsulation header.
pub const REQUEST_HEADER_LEN: usize = 16;

/// The header rmw_cyclonedds puts before every request and reply
/// (`cdds_request_header_t`); a reply carries its request's unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHeader {
    /// `guid`: the client's request writer's DDS instance handle; the
    /// client takes only replies that carry its own.
    pub client: u64,
    /// `seq`: the client's sequence number for this request.
    pub sequence: i64,
}

/// The services edgerec offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceKind {
    /// `~/pause`, `rosbag2_interfaces/srv/Pause`.
    Pause,
    /// `~/resume`, `rosbag2_interfaces/srv/Resume`.
    Resume,
    /// `~/is_paused`, `rosbag2_interfaces/srv/IsPaused`.
    IsPaused,
    /// `~/split_bagfile`, `rosbag2_interfaces/srv/SplitBagfile`.
    SplitBagfile,
    /// `~/trigger`, `std_srvs/srv/Trigger`.
    Trigger,
}

impl ServiceKind {
    /// Every service, in the order they are created.
    pub const ALL: [ServiceKind; 5] = [
        ServiceKind::Pause,
        ServiceKind::Resume,
        ServiceKind::IsPaused,
        ServiceKind::SplitBagfile,
        ServiceKind::Trigger,
    ];

    /// The service's name under the node (`is_paused`), as rosbag2's
    /// recorder names it.
    pub fn name(self) -> &'static str {
        match self {
            ServiceKind::Pause => "pause",
            ServiceKind::Resume => "resume",
            ServiceKind::IsPaused => "is_paused",
            ServiceKind::SplitBagfile => "split_bagfile",
            ServiceKind::Trigger => "trigger",
        }
    }

    /// The service for a name under the node (`is_paused`).
    pub fn from_name(name: &str) -> Option<ServiceKind> {
        ServiceKind::ALL.into_iter().find(|k| k.name() == name)
    }

    fn package_and_type(self) -> (&'static str, &'static str) {
        match self {
            ServiceKind::Pause => ("rosbag2_interfaces", "Pause"),
            ServiceKind::Resume => ("rosbag2_interfaces", "Resume"),
            ServiceKind::IsPaused => ("rosbag2_interfaces", "IsPaused"),
            ServiceKind::SplitBagfile => ("rosbag2_interfaces", "SplitBagfile"),
            ServiceKind::Trigger => ("std_srvs", "Trigger"),
        }
    }

    /// The ROS service type (`rosbag2_interfaces/srv/Pause`).
    pub fn service_type(self) -> String {
        let (pkg, ty) = self.package_and_type();
        format!("{pkg}/srv/{ty}")
    }

    /// The request's DDS type (`rosbag2_interfaces::srv::dds_::Pause_Request_`).
    pub fn request_dds_type(self) -> String {
        let (pkg, ty) = self.package_and_type();
        format!("{pkg}::srv::dds_::{ty}_Request_")
    }

    /// The reply's DDS type (`rosbag2_interfaces::srv::dds_::Pause_Response_`).
    pub fn response_dds_type(self) -> String {
        let (pkg, ty) = self.package_and_type();
        format!("{pkg}::srv::dds_::{ty}_Response_")
    }

    /// The request and reply DDS topics for the node `node` in `namespace`:
    /// `("rq/edgerec/pauseRequest", "rr/edgerec/pauseReply")` for `edgerec`
    /// in `/`.
    pub fn topics(self, namespace: &str, node: &str) -> (String, String) {
        let private = format!("~/{}", self.name());
        names::service_topics(&names::expand_topic(&private, namespace, node))
    }

    /// The operator command a request for this service asks for; a ROS
    /// trigger gives no reason (its request is empty).
    pub fn command(self) -> Command {
        match self {
            ServiceKind::Pause => Command::Pause,
            ServiceKind::Resume => Command::Resume,
            ServiceKind::IsPaused => Command::IsPaused,
            ServiceKind::SplitBagfile => Command::Split,
            ServiceKind::Trigger => Command::Trigger {
                name: String::new(),
                reason: String::new(),
                window: crate::control::Window::default(),
            },
        }
    }
}

/// A request taken from `rq/...Request`. Every request edgerec serves is
/// empty, so the header and which service it came on is all there is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// To echo in the reply.
    pub header: RequestHeader,
    /// The service it came on.
    pub kind: ServiceKind,
}

impl Request {
    /// The operator command it asks for.
    pub fn command(&self) -> Command {
        self.kind.command()
    }
}

/// A reply's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// `Pause`, `Resume`, `SplitBagfile`: nothing.
    Empty,
    /// `IsPaused`.
    IsPaused {
        /// Whether recording is paused.
        paused: bool,
    },
    /// `std_srvs/srv/Trigger`.
    Trigger {
        /// Whether the trigger was taken.
        success: bool,
        /// What happened, for the operator.
        message: String,
    },
}

impl Response {
    /// The reply shape `kind` has, to compare with.
    fn fits(&self, kind: ServiceKind) -> bool {
        matches!(
            (kind, self),
            (
                ServiceKind::Pause | ServiceKind::Resume | ServiceKind::SplitBagfile,
                Response::Empty
            ) | (ServiceKind::IsPaused, Response::IsPaused { .. })
                | (ServiceKind::Trigger, Response::Trigger { .. })
        )
    }
}

/// Why a request or reply could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The bytes are not the CDR the service's type makes.
    #[error("{kind:?} {part}: {source}")]
    Cdr {
        /// The service.
        kind: ServiceKind,
        /// `request` or `reply`.
        part: &'static str,
        /// What is wrong with the bytes.
        source: CdrError,
    },
    /// A reply whose fields are not the service's.
    #[error("{response:?} is not a reply of {kind:?}")]
    WrongResponse {
        /// The service.
        kind: ServiceKind,
        /// The reply given.
        response: Response,
    },
}

/// Writes the encapsulation header and the request header.
fn framed(header: RequestHeader, capacity: usize) -> CdrWriter {
    let mut w = CdrWriter::with_capacity(4 + REQUEST_HEADER_LEN + capacity);
    w.u64(header.client).i64(header.sequence);
    w
}

/// Reads a framed sample: the encapsulation, the request header, the
/// struct `body` reads, and no more than the padding after it.
fn read_framed<T>(
    kind: ServiceKind,
    part: &'static str,
    bytes: &[u8],
    body: impl FnOnce(&mut CdrReader<'_>) -> Result<T, CdrError>,
) -> Result<(RequestHeader, T), ServiceError> {
    let read = || {
        let mut r = CdrReader::new(bytes)?;
        let header = RequestHeader {
            client: r.u64("request header guid")?,
            sequence: r.i64("request header seq")?,
        };
        let value = body(&mut r)?;
        r.finish()?;
        Ok((header, value))
    };
    read().map_err(|source| ServiceError::Cdr { kind, part, source })
}

/// A request as a client sends it.
pub fn encode_request(kind: ServiceKind, header: RequestHeader) -> Vec<u8> {
    let mut w = framed(header, 1);
    match kind {
        // Empty requests, one dummy byte each.
        ServiceKind::Pause
        | ServiceKind::Resume
        | ServiceKind::IsPaused
        | ServiceKind::SplitBagfile
        | ServiceKind::Trigger => w.u8(0),
    };
    w.finish()
}

/// Reads a request taken from `kind`'s request topic: the encapsulation,
/// the request header, the (empty) request struct, and no more than the
/// padding after it.
pub fn parse_request(kind: ServiceKind, bytes: &[u8]) -> Result<Request, ServiceError> {
    let (header, ()) = read_framed(kind, "request", bytes, |r| {
        match kind {
            ServiceKind::Pause
            | ServiceKind::Resume
            | ServiceKind::IsPaused
            | ServiceKind::SplitBagfile
            | ServiceKind::Trigger => r.u8("structure_needs_at_least_one_member")?,
        };
        Ok(())
    })?;
    Ok(Request { header, kind })
}

/// A reply to the request with `header`, as the server writes it to
/// `kind`'s reply topic.
pub fn encode_response(
    kind: ServiceKind,
    header: RequestHeader,
    response: &Response,
) -> Result<Vec<u8>, ServiceError> {
    if !response.fits(kind) {
        return Err(ServiceError::WrongResponse {
            kind,
            response: response.clone(),
        });
    }
    let capacity = match response {
        Response::Trigger { message, .. } => 8 + message.len(),
        Response::Empty | Response::IsPaused { .. } => 1,
    };
    let mut w = framed(header, capacity);
    match response {
        Response::Empty => w.u8(0),
        Response::IsPaused { paused } => w.bool(*paused),
        Response::Trigger { success, message } => w.bool(*success).string(message),
    };
    Ok(w.finish())
}

/// Reads a reply taken from `kind`'s reply topic (what a client does).
pub fn parse_response(
    kind: ServiceKind,
    bytes: &[u8],
) -> Result<(RequestHeader, Response), ServiceError> {
    read_framed(kind, "reply", bytes, |r| {
        Ok(match kind {
            ServiceKind::Pause | ServiceKind::Resume | ServiceKind::SplitBagfile => {
                r.u8("structure_needs_at_least_one_member")?;
                Response::Empty
            }
            ServiceKind::IsPaused => Response::IsPaused {
                paused: r.bool("paused")?,
            },
            ServiceKind::Trigger => Response::Trigger {
                success: r.bool("success")?,
                message: r.string("message")?.to_owned(),
            },
        })
    })
}

/// The 16-byte id rmw_cyclonedds gives each client and service
/// (`get_unique_csid` in `rmw_node.cpp`): the first 12 bytes of the
/// participant's GUID (its prefix), then a per-participant counter,
/// big-endian, where the entity id was.
pub fn client_service_id(participant: &Gid, counter: u32) -> [u8; 16] {
    let mut id = [0; 16];
    id[..12].copy_from_slice(&participant[..12]);
    id[12..].copy_from_slice(&counter.to_be_bytes());
    id
}

/// The USER_DATA rmw_cyclonedds sets on both DDS endpoints of a service
/// (`serviceid=<id>;`) or of a client (`clientid=<id>;`), the id written
/// as `csid_to_string` does: hex bytes joined by `.`, the first padded to
/// two characters with a space (`std::setw(2)` applies to it alone), the
/// others unpadded. A client sees the service as available when a matched
/// request reader and reply writer carry the same `serviceid`.
pub fn user_data(is_service: bool, id: &[u8; 16]) -> String {
    let mut s = String::from(if is_service {
        "serviceid="
    } else {
        "clientid="
    });
    let _ = write!(s, "{:>2x}", id[0]);
    for b in &id[1..] {
        let _ = write!(s, ".{b:x}");
    }
    s.push(';');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: RequestHeader = RequestHeader {
        client: 0x0102_0304_0506_0708,
        sequence: 42,
    };

    const HEADER_BYTES: [u8; 16] = [8, 7, 6, 5, 4, 3, 2, 1, 42, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn names_types_and_topics() {
        assert_eq!(
            ServiceKind::Pause.topics("/", "edgerec"),
            (
                "rq/edgerec/pauseRequest".into(),
                "rr/edgerec/pauseReply".into()
            )
        );
        assert_eq!(
            ServiceKind::SplitBagfile.topics("/robot", "edgerec"),
            (
                "rq/robot/edgerec/split_bagfileRequest".into(),
                "rr/robot/edgerec/split_bagfileReply".into()
            )
        );
        assert_eq!(
            ServiceKind::IsPaused.request_dds_type(),
            "rosbag2_interfaces::srv::dds_::IsPaused_Request_"
        );
        assert_eq!(
            ServiceKind::Trigger.response_dds_type(),
            "std_srvs::srv::dds_::Trigger_Response_"
        );
        assert_eq!(
            ServiceKind::SplitBagfile.service_type(),
            "rosbag2_interfaces/srv/SplitBagfile"
        );
        for k in ServiceKind::ALL {
            assert_eq!(ServiceKind::from_name(k.name()), Some(k));
            // The DDS names map back to ROS names as discovery sees them.
            assert_eq!(
                names::ros_type(&k.request_dds_type()),
                Some(format!("{}_Request", k.service_type()))
            );
        }
        assert_eq!(ServiceKind::from_name("toggle_paused"), None);
        assert_eq!(ServiceKind::SplitBagfile.command(), Command::Split);
    }

    #[test]
    fn request_bytes_hand_checked() {
        let b = encode_request(ServiceKind::Pause, HEADER);
        assert_eq!(b, [&[0, 1, 0, 0][..], &HEADER_BYTES, &[0]].concat());
        let r = parse_request(ServiceKind::Pause, &b).unwrap();
        assert_eq!(r.header, HEADER);
        assert_eq!(r.command(), Command::Pause);
    }

    #[test]
    fn response_bytes_hand_checked() {
        let h = [&[0, 1, 0, 0][..], &HEADER_BYTES].concat();
        let empty = encode_response(ServiceKind::Resume, HEADER, &Response::Empty).unwrap();
        assert_eq!(empty, [&h[..], &[0]].concat());
        let paused = Response::IsPaused { paused: true };
        let b = encode_response(ServiceKind::IsPaused, HEADER, &paused).unwrap();
        assert_eq!(b, [&h[..], &[1]].concat());
        let trigger = Response::Trigger {
            success: true,
            message: "ok".into(),
        };
        let b = encode_response(ServiceKind::Trigger, HEADER, &trigger).unwrap();
        // bool at 16, three pad bytes, the string's length at 20.
        assert_eq!(
            b,
            [&h[..], &[1, 0, 0, 0], &[3, 0, 0, 0, b'o', b'k', 0]].concat()
        );
    }

    #[test]
    fn round_trips() {
        let responses = [
            (ServiceKind::Pause, Response::Empty),
            (ServiceKind::Resume, Response::Empty),
            (ServiceKind::SplitBagfile, Response::Empty),
            (ServiceKind::IsPaused, Response::IsPaused { paused: false }),
            (ServiceKind::IsPaused, Response::IsPaused { paused: true }),
            (
                ServiceKind::Trigger,
                Response::Trigger {
                    success: false,
                    message: "not recording: disk full".into(),
                },
            ),
            (
                ServiceKind::Trigger,
                Response::Trigger {
                    success: true,
                    message: String::new(),
                },
            ),
        ];
        for header in [
            HEADER,
            RequestHeader {
                client: u64::MAX,
                sequence: i64::MIN,
            },
        ] {
            for (kind, response) in &responses {
                let req = encode_request(*kind, header);
                assert_eq!(parse_request(*kind, &req).unwrap().header, header);
                let rep = encode_response(*kind, header, response).unwrap();
                assert_eq!(
                    parse_response(*kind, &rep).unwrap(),
                    (header, response.clone())
                );
            }
        }
    }

    #[test]
    fn a_reply_must_fit_its_service() {
        let err = encode_response(
            ServiceKind::Pause,
            HEADER,
            &Response::IsPaused { paused: true },
        )
        .unwrap_err();
        assert!(matches!(
            err,
            ServiceError::WrongResponse {
                kind: ServiceKind::Pause,
                ..
            }
        ));
        assert!(encode_response(ServiceKind::Trigger, HEADER, &Response::Empty).is_err());
    }

    #[test]
    fn malformed_requests_are_errors() {
        let good = encode_request(ServiceKind::Trigger, HEADER);
        for n in 0..good.len() {
            let err = parse_request(ServiceKind::Trigger, &good[..n]).unwrap_err();
            assert!(
                matches!(
                    err,
                    ServiceError::Cdr {
                        part: "request",
                        ..
                    }
                ),
                "{n}: {err}"
            );
        }
        let mut big_endian = good.clone();
        big_endian[1] = 0;
        assert_eq!(
            parse_request(ServiceKind::Trigger, &big_endian),
            Err(ServiceError::Cdr {
                kind: ServiceKind::Trigger,
                part: "request",
                source: CdrError::Encapsulation { found: [0, 0] }
            })
        );
        // Padding to a multiple of 4 is fine; a newer, longer request is not.
        let mut padded = good.clone();
        padded.extend([0, 0, 0]);
        assert!(parse_request(ServiceKind::Trigger, &padded).is_ok());
        padded.push(0);
        let err = parse_request(ServiceKind::Trigger, &padded).unwrap_err();
        assert!(err.to_string().contains("after the message"), "{err}");
    }

    #[test]
    fn malformed_replies_are_errors() {
        let h = [&[0, 1, 0, 0][..], &HEADER_BYTES].concat();
        let absurd = [&h[..], &[1, 0, 0, 0], &[0xff, 0xff, 0xff, 0x7f], b"x\0"].concat();
        let err = parse_response(ServiceKind::Trigger, &absurd).unwrap_err();
        assert!(
            matches!(
                err,
                ServiceError::Cdr {
                    source: CdrError::Truncated {
                        what: "message",
                        ..
                    },
                    ..
                }
            ),
            "{err}"
        );
        let bad_bool = [&h[..], &[2]].concat();
        assert!(parse_response(ServiceKind::IsPaused, &bad_bool).is_err());
        let good = encode_response(
            ServiceKind::Trigger,
            HEADER,
            &Response::Trigger {
                success: true,
                message: "done".into(),
            },
        )
        .unwrap();
        for n in 0..good.len() {
            assert!(
                parse_response(ServiceKind::Trigger, &good[..n]).is_err(),
                "{n}"
            );
        }
    }

    #[test]
    fn client_service_ids_as_rmw_cyclonedds_writes_them() {
        let participant: Gid = [
            0x01, 0x10, 0xab, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0xee, 0xee,
            0xee, 0xc1,
        ];
        let id = client_service_id(&participant, 0x0102);
        assert_eq!(&id[..12], &participant[..12]);
        assert_eq!(&id[12..], &[0, 0, 1, 2]);
        assert_eq!(
            user_data(true, &id),
            "serviceid= 1.10.ab.3.4.5.6.7.8.9.a.b.0.0.1.2;"
        );
        let mut id = id;
        id[0] = 0xc0;
        assert!(user_data(false, &id).starts_with("clientid=c0.10."));
    }
}
