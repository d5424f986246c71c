//! rosbag2's recorder services (`~/pause`, `~/resume`, `~/is_paused`,
//! `~/split_bagfile`) and edgerec's `~/trigger` on the DDS backend, with
//! rmw_cyclonedds' request/reply framing, so scripts written for `ros2 bag
//! record` work. Services do not interoperate across RMW vendors in ROS 2
//! itself: a client on Fast DDS needs the r2r backend.

use super::ffi::{self, Participant, Writer};
use crate::audit::Surface;
use crate::control::{execute_in, ControlSlot, Reply};
use crate::rate_limit::Requester;
use crate::services::{
    client_service_id, encode_response, parse_request, user_data, Response, ServiceKind,
};
use crate::RosError;

/// One service: its request reader and reply writer.
struct Endpoint {
    kind: ServiceKind,
    requests: cyclors::dds_entity_t,
    replies: Writer,
}

/// Every service of the node.
pub struct Services {
    slot: ControlSlot,
    endpoints: Vec<Endpoint>,
}

impl Services {
    /// Makes the endpoints of every service of `namespace`/`node`.
    pub fn new(
        dp: &Participant,
        slot: ControlSlot,
        namespace: &str,
        node: &str,
    ) -> Result<Self, RosError> {
        let mut endpoints = Vec::new();
        for (i, kind) in ServiceKind::ALL.into_iter().enumerate() {
            let (rq, rr) = kind.topics(namespace, node);
            let rq_t = dp.blob_topic(&rq, &kind.request_dds_type())?;
            let rr_t = dp.blob_topic(&rr, &kind.response_dds_type())?;
            let id = client_service_id(&dp.gid(), i as u32 + 1);
            let (requests, replies) = dp.service_endpoints(rq_t, rr_t, &user_data(true, &id))?;
            endpoints.push(Endpoint {
                kind,
                requests,
                replies,
            });
        }
        Ok(Services { slot, endpoints })
    }

    /// Answers every request waiting. A malformed request is logged and
    /// left unanswered (its client times out), as rmw would.
    pub fn serve(&self) -> Result<(), RosError> {
        for e in &self.endpoints {
            let mut requests = Vec::new();
            ffi::take_raw(e.requests, |info, bytes| {
                requests.push((info.publication_handle, bytes.to_vec()))
            });
            for (writer, bytes) in requests {
                let req = match parse_request(e.kind, &bytes) {
                    Ok(r) => r,
                    Err(err) => {
                        tracing::warn!(
                            "~/{}: a malformed request ({err}) is not answered",
                            e.kind.name()
                        );
                        continue;
                    }
                };
                let who = requester(e.requests, writer);
                let cmd = req.command();
                let reply = execute_in(&self.slot, &cmd, &who);
                self.slot.audit(Surface::RosServices, &who, &cmd, &reply);
                let response = response_for(e.kind, &reply);
                match encode_response(e.kind, req.header, &response) {
                    Ok(out) => e.replies.write(&out)?,
                    Err(err) => tracing::warn!("~/{}: {err}", e.kind.name()),
                }
            }
        }
        Ok(())
    }
}

/// Who sent a request: the GUID of the writer that sent it (from the
/// sample's own information, not from the request's bytes, which the
/// client writes), or its handle when discovery no longer knows it.
fn requester(reader: cyclors::dds_entity_t, writer: u64) -> Requester {
    let id = match ffi::matched_writer_guid(reader, writer) {
        Some(guid) => guid.iter().map(|b| format!("{b:02x}")).collect(),
        None => format!("handle {writer:016x}"),
    };
    Requester::RosClient { id }
}

fn response_for(kind: ServiceKind, r: &Reply) -> Response {
    match kind {
        ServiceKind::IsPaused => Response::IsPaused { paused: r.paused },
        ServiceKind::Trigger => Response::Trigger {
            success: r.ok,
            message: r.message.clone(),
        },
        _ => Response::Empty,
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        for e in &self.endpoints {
            ffi::delete(e.requests);
        }
    }
}
