//! The Cyclone DDS calls edgerec makes, behind safe types: a participant,
//! the built-in publication reader, raw-CDR readers with a data-available
//! listener, and raw-CDR writers. Every `unsafe` block of the DDS backend
//! is in this file.

use std::ffi::{c_void, CStr, CString};
use std::mem::MaybeUninit;
use std::ptr;

use cyclors::*;

use crate::graph::Gid;
use crate::qos::{Durability, History, Liveliness, QosProfile, Reliability, RequestQos};
use crate::RosError;

/// Any sample, view and instance state.
const ANY_STATE: u32 = DDS_ANY_STATE;

fn rc_text(rc: i32) -> String {
    // SAFETY: dds_strretcode returns a pointer to a static string for any
    // value.
    let s = unsafe { CStr::from_ptr(dds_strretcode(rc)) };
    s.to_string_lossy().into_owned()
}

fn check(entity: dds_entity_t, call: impl FnOnce() -> String) -> Result<dds_entity_t, RosError> {
    if entity < 0 {
        Err(RosError::Middleware {
            call: call(),
            reason: rc_text(entity),
        })
    } else {
        Ok(entity)
    }
}

fn cstring(s: &str, what: &str) -> Result<CString, RosError> {
    CString::new(s).map_err(|_| RosError::Middleware {
        call: what.to_owned(),
        reason: format!("{s:?} contains a NUL byte"),
    })
}

/// A DDS domain participant; deleting it deletes every reader, writer and
/// topic made from it.
#[derive(Debug)]
pub struct Participant {
    entity: dds_entity_t,
    domain: Option<dds_entity_t>,
    gid: Gid,
}

impl Participant {
    /// Joins `domain_id`. With `config` (Cyclone XML) the domain is created
    /// with it first; with `None`, Cyclone reads `CYCLONEDDS_URI` as usual.
    pub fn new(domain_id: u32, config: Option<&str>) -> Result<Self, RosError> {
        let domain = match config {
            Some(xml) => {
                let c = cstring(xml, "Cyclone DDS configuration")?;
                // SAFETY: `c` is a valid NUL-terminated string for the call.
                let d = unsafe { dds_create_domain(domain_id, c.as_ptr()) };
                if d == DDS_RETCODE_PRECONDITION_NOT_MET as dds_entity_t {
                    // The domain exists in this process already (another
                    // participant made it, with this configuration): join it.
                    None
                } else {
                    Some(check(d, || format!("dds_create_domain({domain_id})"))?)
                }
            }
            None => None,
        };
        // SAFETY: null QoS and listener mean the defaults.
        let entity = unsafe { dds_create_participant(domain_id, ptr::null(), ptr::null()) };
        let entity = match check(entity, || {
            format!("dds_create_participant on domain {domain_id}")
        }) {
            Ok(e) => e,
            Err(e) => {
                if let Some(d) = domain {
                    // SAFETY: `d` is the domain made above and nothing else holds it.
                    unsafe { dds_delete(d) };
                }
                return Err(e);
            }
        };
        let mut guid = MaybeUninit::<dds_guid_t>::zeroed();
        // SAFETY: `entity` is a live participant; `guid` is writable.
        let rc = unsafe { dds_get_guid(entity, guid.as_mut_ptr()) };
        // SAFETY: zeroed is a valid dds_guid_t, and dds_get_guid filled it on success.
        let gid = if rc == 0 {
            unsafe { guid.assume_init() }.v
        } else {
            [0; 16]
        };
        Ok(Participant {
            entity,
            domain,
            gid,
        })
    }

    /// The participant's GUID (its own writers show it as their
    /// participant in discovery).
    pub fn gid(&self) -> Gid {
        self.gid
    }

    /// A reader of the built-in `DCPSPublication` topic.
    pub fn publication_reader(&self) -> Result<PublicationReader, RosError> {
        // SAFETY: a live participant and a pseudo-handle Cyclone defines.
        let r = unsafe {
            dds_create_reader(
                self.entity,
                DDS_BUILTIN_TOPIC_DCPSPUBLICATION,
                ptr::null(),
                ptr::null(),
            )
        };
        Ok(PublicationReader {
            entity: check(r, || "dds_create_reader(DCPSPublication)".into())?,
        })
    }

    /// A keyless raw-CDR topic (`rt/imu`, `sensor_msgs::msg::dds_::Imu_`).
    pub fn blob_topic(&self, dds_topic: &str, dds_type: &str) -> Result<dds_entity_t, RosError> {
        let t = cstring(dds_topic, "topic name")?;
        let ty = cstring(dds_type, "type name")?;
        // SAFETY: live participant, valid C strings; cyclocut copies them.
        let e = unsafe {
            cdds_create_blob_topic(
                self.entity,
                t.as_ptr() as *mut _,
                ty.as_ptr() as *mut _,
                true,
            )
        };
        check(e, || format!("create topic {dds_topic} ({dds_type})"))
    }

    /// A reader of `topic` with `request`'s QoS that calls `on_data` with
    /// `arg` whenever data is available (on a Cyclone thread).
    ///
    /// # Safety
    /// `arg` must stay valid until the reader is deleted, and `on_data`
    /// must not unwind.
    pub unsafe fn blob_reader(
        &self,
        topic: dds_entity_t,
        request: &RequestQos,
        on_data: unsafe extern "C" fn(dds_entity_t, *mut c_void),
        arg: *mut c_void,
    ) -> Result<dds_entity_t, RosError> {
        let qos = reader_qos(request);
        let listener = dds_create_listener(arg);
        dds_lset_data_available(listener, Some(on_data));
        let r = dds_create_reader(self.entity, topic, qos, listener);
        dds_delete_listener(listener);
        dds_delete_qos(qos);
        check(r, || "dds_create_reader".into())
    }

    /// A service endpoint pair as rmw_cyclonedds makes it: a reader on the
    /// request topic (taken by polling) and a writer on the reply topic,
    /// both reliable, volatile, keep last 10, carrying `user_data`
    /// (`serviceid=...;`) so clients see the service as available.
    pub fn service_endpoints(
        &self,
        request_topic: dds_entity_t,
        reply_topic: dds_entity_t,
        user_data: &str,
    ) -> Result<(dds_entity_t, Writer), RosError> {
        // SAFETY: fresh QoS objects set and deleted here; the participant
        // and topics are live; dds_qset_userdata copies the bytes.
        unsafe {
            let qos = dds_create_qos();
            set_reliability_durability(qos, Reliability::Reliable, Durability::Volatile);
            dds_qset_history(qos, dds_history_kind_DDS_HISTORY_KEEP_LAST, 10);
            dds_qset_userdata(qos, user_data.as_ptr() as *const c_void, user_data.len());
            let r = dds_create_reader(self.entity, request_topic, qos, ptr::null());
            let w = dds_create_writer(self.entity, reply_topic, qos, ptr::null());
            dds_delete_qos(qos);
            let r = check(r, || "dds_create_reader (service request)".into())?;
            let w = match check(w, || "dds_create_writer (service reply)".into()) {
                Ok(w) => w,
                Err(e) => {
                    dds_delete(r);
                    return Err(e);
                }
            };
            Ok((r, Writer { entity: w }))
        }
    }

    /// A raw-CDR writer on `topic` (reliable, volatile, keep last `depth`).
    pub fn blob_writer(
        &self,
        topic: dds_entity_t,
        reliability: Reliability,
        durability: Durability,
        depth: u32,
    ) -> Result<Writer, RosError> {
        // SAFETY: a fresh QoS object, set and deleted here; the participant
        // and topic are live.
        let w = unsafe {
            let qos = dds_create_qos();
            set_reliability_durability(qos, reliability, durability);
            dds_qset_history(
                qos,
                dds_history_kind_DDS_HISTORY_KEEP_LAST,
                depth.max(1) as i32,
            );
            let w = dds_create_writer(self.entity, topic, qos, ptr::null());
            dds_delete_qos(qos);
            w
        };
        Ok(Writer {
            entity: check(w, || "dds_create_writer".into())?,
        })
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        // SAFETY: the participant (and the domain made for it) are ours;
        // deleting them deletes their children, after waiting for any
        // listener call in progress.
        unsafe {
            dds_delete(self.entity);
            if let Some(d) = self.domain {
                dds_delete(d);
            }
        }
    }
}

/// Deletes a reader, waiting for a listener call in progress to end.
pub fn delete(entity: dds_entity_t) {
    // SAFETY: deleting an entity handle is safe even if it is already gone
    // (Cyclone returns an error code).
    unsafe { dds_delete(entity) };
}

unsafe fn set_reliability_durability(qos: *mut dds_qos_t, r: Reliability, d: Durability) {
    let kind = match r {
        Reliability::Reliable => dds_reliability_kind_DDS_RELIABILITY_RELIABLE,
        Reliability::BestEffort => dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT,
    };
    dds_qset_reliability(qos, kind, 100_000_000);
    let kind = match d {
        Durability::Volatile => dds_durability_kind_DDS_DURABILITY_VOLATILE,
        Durability::TransientLocal => dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL,
    };
    dds_qset_durability(qos, kind);
}

fn reader_qos(r: &RequestQos) -> *mut dds_qos_t {
    // SAFETY: a fresh QoS object the caller deletes.
    unsafe {
        let qos = dds_create_qos();
        set_reliability_durability(qos, r.reliability, r.durability);
        dds_qset_history(
            qos,
            dds_history_kind_DDS_HISTORY_KEEP_LAST,
            r.depth.max(1) as i32,
        );
        // Our own writers (/diagnostics, the status) are not recorded.
        dds_qset_ignorelocal(qos, dds_ignorelocal_kind_DDS_IGNORELOCAL_PARTICIPANT);
        qos
    }
}

/// One sample taken from a raw-CDR reader.
#[derive(Debug)]
pub struct RawSample {
    /// The source timestamp (ns since the epoch), as the writer stamped it.
    pub source_timestamp: i64,
    /// The writer's instance handle (which publisher sent it).
    pub publication_handle: u64,
}

/// The GUID (16 bytes) of the remote writer `handle` matched with
/// `reader`, as discovery announced it; `None` once it is gone.
pub fn matched_writer_guid(reader: dds_entity_t, handle: u64) -> Option<[u8; 16]> {
    // SAFETY: Cyclone returns a newly allocated endpoint (or null), which
    // is read once and freed with its own function.
    unsafe {
        let e = dds_get_matched_publication_data(reader, handle);
        if e.is_null() {
            return None;
        }
        let guid = (*e).key.v;
        dds_builtintopic_free_endpoint(e);
        Some(guid)
    }
}

/// Takes every sample available on `reader`, handing each one's serialized
/// bytes (encapsulation header included) to `f`. Returns how many were
/// taken.
pub fn take_raw(reader: dds_entity_t, mut f: impl FnMut(&RawSample, &[u8])) -> usize {
    let mut n = 0;
    loop {
        let mut sd: *mut ddsi_serdata = ptr::null_mut();
        let mut si = MaybeUninit::<dds_sample_info_t>::zeroed();
        // SAFETY: one serdata slot and one info slot, both writable.
        let got = unsafe { dds_takecdr(reader, &mut sd, 1, si.as_mut_ptr(), ANY_STATE) };
        if got <= 0 || sd.is_null() {
            return n;
        }
        // SAFETY: dds_takecdr filled the info for the sample it returned.
        let si = unsafe { si.assume_init() };
        if si.valid_data {
            // SAFETY: `sd` is a serdata reference we own until unref; the
            // iovec returned by to_ser_ref points into it until the matching
            // to_ser_unref, and is read only in between.
            unsafe {
                let size = ddsi_serdata_size(sd) as usize;
                let mut iov = MaybeUninit::<ddsrt_iovec_t>::zeroed();
                let r = ddsi_serdata_to_ser_ref(sd, 0, size, iov.as_mut_ptr());
                let iov = iov.assume_init();
                let bytes: &[u8] = if iov.iov_base.is_null() {
                    &[]
                } else {
                    std::slice::from_raw_parts(iov.iov_base as *const u8, iov.iov_len)
                };
                f(
                    &RawSample {
                        source_timestamp: si.source_timestamp,
                        publication_handle: si.publication_handle,
                    },
                    bytes,
                );
                ddsi_serdata_to_ser_unref(r, &iov);
            }
            n += 1;
        }
        // SAFETY: the reference dds_takecdr gave us, released once.
        unsafe { ddsi_serdata_unref(sd) };
    }
}

/// Lost and rejected sample counts of a reader, as DDS reports them.
pub fn loss_counts(reader: dds_entity_t) -> (u64, u64) {
    let mut lost = MaybeUninit::<dds_sample_lost_status_t>::zeroed();
    let mut rejected = MaybeUninit::<dds_sample_rejected_status_t>::zeroed();
    // SAFETY: writable status structs; zeroed is a valid value if the call
    // fails.
    unsafe {
        dds_get_sample_lost_status(reader, lost.as_mut_ptr());
        dds_get_sample_rejected_status(reader, rejected.as_mut_ptr());
        (
            u64::from(lost.assume_init().total_count),
            u64::from(rejected.assume_init().total_count),
        )
    }
}

/// A raw-CDR writer.
#[derive(Debug)]
pub struct Writer {
    entity: dds_entity_t,
}

impl Writer {
    /// The writer's GUID (what `ros_discovery_info` lists).
    pub fn gid(&self) -> Gid {
        let mut guid = MaybeUninit::<dds_guid_t>::zeroed();
        // SAFETY: a live writer; `guid` is writable and zeroed is a valid
        // value if the call fails.
        unsafe {
            dds_get_guid(self.entity, guid.as_mut_ptr());
            guid.assume_init().v
        }
    }

    /// Writes one serialized sample (encapsulation header included).
    pub fn write(&self, bytes: &[u8]) -> Result<(), RosError> {
        // SAFETY: the writer is live; the iovec points at `bytes` for the
        // duration of ddsi_serdata_from_ser_iov, which copies them;
        // dds_writecdr takes over the serdata reference.
        unsafe {
            let topic = dds_get_topic(self.entity);
            let mut st: *const ddsi_sertype = ptr::null();
            let rc = dds_get_entity_sertype(self.entity, &mut st);
            if rc < 0 || st.is_null() || topic < 0 {
                return Err(RosError::Middleware {
                    call: "dds_get_entity_sertype".into(),
                    reason: rc_text(rc),
                });
            }
            let iov = ddsrt_iovec_t {
                iov_base: bytes.as_ptr() as *mut c_void,
                iov_len: bytes.len() as _,
            };
            let sd =
                ddsi_serdata_from_ser_iov(st, ddsi_serdata_kind_SDK_DATA, 1, &iov, bytes.len());
            if sd.is_null() {
                return Err(RosError::Middleware {
                    call: "ddsi_serdata_from_ser_iov".into(),
                    reason: "no serdata made".into(),
                });
            }
            let rc = dds_writecdr(self.entity, sd);
            if rc < 0 {
                return Err(RosError::Middleware {
                    call: "dds_writecdr".into(),
                    reason: rc_text(rc),
                });
            }
        }
        Ok(())
    }
}

/// A change in the publications DDS knows of.
#[derive(Debug)]
pub enum PublicationEvent {
    /// A writer is alive, with what it offers.
    Alive {
        /// The instance handle (the key of later events).
        handle: u64,
        /// The writer's GUID.
        gid: Gid,
        /// Its participant's GUID.
        participant: Gid,
        /// The DDS topic name.
        topic: String,
        /// The DDS type name.
        type_name: String,
        /// What it offers.
        qos: QosProfile,
        /// Its USER_DATA.
        user_data: Vec<u8>,
    },
    /// A writer is gone (deleted, or its participant lost).
    Gone {
        /// The instance handle of its `Alive` event.
        handle: u64,
    },
}

/// The built-in reader of `DCPSPublication`.
#[derive(Debug)]
pub struct PublicationReader {
    entity: dds_entity_t,
}

impl PublicationReader {
    /// Takes what changed since the last call.
    pub fn take(&self) -> Result<Vec<PublicationEvent>, RosError> {
        const MAX: usize = 64;
        let mut out = Vec::new();
        loop {
            let mut samples: [*mut c_void; MAX] = [ptr::null_mut(); MAX];
            let mut infos = MaybeUninit::<[dds_sample_info_t; MAX]>::zeroed();
            // SAFETY: MAX loan slots and MAX info slots; Cyclone loans the
            // samples, which are returned below before the next take.
            let n = unsafe {
                dds_take(
                    self.entity,
                    samples.as_mut_ptr(),
                    infos.as_mut_ptr() as *mut _,
                    MAX,
                    MAX as u32,
                )
            };
            if n < 0 {
                return Err(RosError::Middleware {
                    call: "dds_take(DCPSPublication)".into(),
                    reason: rc_text(n),
                });
            }
            if n == 0 {
                return Ok(out);
            }
            // SAFETY: dds_take filled the first n infos.
            let infos = unsafe { infos.assume_init() };
            for i in 0..n as usize {
                let si = &infos[i];
                if si.instance_state != dds_instance_state_DDS_IST_ALIVE {
                    out.push(PublicationEvent::Gone {
                        handle: si.instance_handle,
                    });
                    continue;
                }
                if !si.valid_data {
                    continue;
                }
                // SAFETY: a valid loaned sample of the built-in endpoint type;
                // its strings and QoS live until the loan is returned.
                unsafe {
                    let s = &*(samples[i] as *const dds_builtintopic_endpoint_t);
                    let topic = CStr::from_ptr(s.topic_name).to_string_lossy().into_owned();
                    let type_name = CStr::from_ptr(s.type_name).to_string_lossy().into_owned();
                    let (qos, user_data) = offered(s.qos);
                    out.push(PublicationEvent::Alive {
                        handle: si.instance_handle,
                        gid: s.key.v,
                        participant: s.participant_key.v,
                        topic,
                        type_name,
                        qos,
                        user_data,
                    });
                }
            }
            // SAFETY: returning the loan dds_take made, once.
            unsafe { dds_return_loan(self.entity, samples.as_mut_ptr(), n) };
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        delete(self.entity);
    }
}

impl Drop for PublicationReader {
    fn drop(&mut self) {
        delete(self.entity);
    }
}

/// A writer's offered QoS and USER_DATA from a discovered QoS object.
unsafe fn offered(qos: *const dds_qos_t) -> (QosProfile, Vec<u8>) {
    let mut p = QosProfile {
        history: History::Unknown,
        ..Default::default()
    };
    if qos.is_null() {
        return (p, Vec::new());
    }
    let mut rk: dds_reliability_kind_t = dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT;
    let mut blocking: dds_duration_t = 0;
    if dds_qget_reliability(qos, &mut rk, &mut blocking) {
        p.reliability = if rk == dds_reliability_kind_DDS_RELIABILITY_RELIABLE {
            Reliability::Reliable
        } else {
            Reliability::BestEffort
        };
    }
    let mut dk: dds_durability_kind_t = dds_durability_kind_DDS_DURABILITY_VOLATILE;
    if dds_qget_durability(qos, &mut dk) {
        p.durability = if dk == dds_durability_kind_DDS_DURABILITY_VOLATILE {
            Durability::Volatile
        } else {
            Durability::TransientLocal
        };
    }
    let finite = |d: dds_duration_t| (0..i64::MAX).contains(&d).then_some(d as u64);
    let mut d: dds_duration_t = 0;
    if dds_qget_deadline(qos, &mut d) {
        p.deadline = finite(d);
    }
    if dds_qget_lifespan(qos, &mut d) {
        p.lifespan = finite(d);
    }
    let mut lk: dds_liveliness_kind_t = dds_liveliness_kind_DDS_LIVELINESS_AUTOMATIC;
    if dds_qget_liveliness(qos, &mut lk, &mut d) {
        p.liveliness = if lk == dds_liveliness_kind_DDS_LIVELINESS_AUTOMATIC {
            Liveliness::Automatic
        } else {
            Liveliness::ManualByTopic
        };
        p.liveliness_lease = finite(d);
    }
    let mut ud: *mut c_void = ptr::null_mut();
    let mut sz: usize = 0;
    let mut user_data = Vec::new();
    if dds_qget_userdata(qos, &mut ud, &mut sz) && !ud.is_null() {
        user_data = std::slice::from_raw_parts(ud as *const u8, sz).to_vec();
        dds_free(ud);
    }
    (p, user_data)
}
