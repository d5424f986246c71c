//! The connection to the fleet's broker and what goes over it.
//!
//! Two threads: `edgerec-remote-io` drives rumqttc's event loop (connect,
//! TLS, keepalive, QoS 1 acknowledgements and redelivery after a
//! reconnect, which the persistent session keeps) and waits with backoff
//! after a failure; `edgerec-remote` publishes: the retained `connection`
//! message once connected, the retained status when it changed (at most
//! every `status_interval`), and whatever waits in the [`Outbox`]. Neither
//! is ever waited on by the recorder; the status comes from a function the
//! health side answers from memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rumqttc::{
    Client, ConnectReturnCode, Connection, ConnectionError, Event, LastWill, MqttOptions, Outgoing,
    Packet, Publish, QoS, RecvTimeoutError, TlsConfiguration, Transport,
};

use crate::commands::{Commands, Counts, Handler};
use crate::journal::Journal;
use crate::outbox::{Message, Outbox};
use crate::{RemoteError, Settings};

/// The recorder's status as JSON, or `None` while there is none yet.
pub type StatusFeed = Box<dyn FnMut() -> Option<String> + Send>;

/// Largest packet the broker may send the vehicle. Commands are at most
/// 16 KiB ([`crate::command::MAX_COMMAND`]) and a larger one is answered
/// `rejected`; a packet past this ends the connection (rumqttc), and the
/// broker would deliver it again at each reconnect, so the broker's own
/// limit should be below it (Mosquitto: `message_size_limit`).
const MAX_INCOMING: usize = 1 << 20;

/// Commands waiting for the command thread; past it one is dropped
/// unanswered (and counted), and the broker's redelivery after the next
/// reconnect brings it back.
const COMMAND_QUEUE: usize = 64;

/// Largest payload the vehicle publishes; a status larger than this is
/// not sent (counted, and said in `last_error`).
pub const MAX_PAYLOAD: usize = 256 << 10;

/// Messages rumqttc's request channel holds between the publisher and
/// the event loop.
const REQUEST_CHANNEL: usize = 64;

/// The publisher's tick.
const TICK: Duration = Duration::from_millis(100);

/// How often the status is looked at for alerts.
const ALERT_LOOK: Duration = Duration::from_secs(1);

/// First wait after a failed connection; doubled each failure up to
/// [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// How long a clean stop waits for the offline message and the
/// DISCONNECT to leave.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The link's state, for the status and the health side.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkStatus {
    /// `remote.broker`.
    pub broker: String,
    /// The MQTT client id.
    pub vehicle_id: String,
    /// The topic prefix.
    pub prefix: String,
    /// Connected (the broker acknowledged the session).
    pub connected: bool,
    /// Seconds in the current state (connected, or not).
    pub for_s: f64,
    /// Connections made since the start.
    pub connects: u64,
    /// Connections lost since the start.
    pub disconnects: u64,
    /// Messages handed to the connection (status, connection, queued).
    pub published: u64,
    /// Of those, acknowledged by the broker (QoS 1).
    pub acknowledged: u64,
    /// Messages waiting for the link.
    pub queued: usize,
    /// Messages dropped: the oldest, when the queue was full, and statuses
    /// over [`MAX_PAYLOAD`].
    pub dropped: u64,
    /// Why the last connection failed or ended.
    pub last_error: Option<String>,
    /// Set while the link has been down longer than the keepalive: what
    /// the health side shows (degraded, not a fault).
    pub down: Option<String>,
    /// The fleet's commands run.
    pub commands_run: u64,
    /// The fleet's commands refused (malformed, unknown, not allowed,
    /// expired, repeated, or dropped because too many waited).
    pub commands_rejected: u64,
}

#[derive(Debug)]
struct State {
    connected: bool,
    changed_at: Instant,
    connects: u64,
    disconnects: u64,
    published: u64,
    acknowledged: u64,
    oversize: u64,
    last_error: Option<String>,
    /// The retained online message is owed since the last CONNACK.
    announce: bool,
    commands: Counts,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    outbox: Mutex<Outbox>,
}

/// A way to read the link's state and queue messages, shared by whoever
/// needs it.
#[derive(Debug, Clone)]
pub struct LinkHandle {
    shared: Arc<Shared>,
    settings: Arc<Settings>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LinkHandle {
    /// The link's state now.
    pub fn status(&self) -> LinkStatus {
        let st = lock(&self.shared.state);
        let (queued, dropped) = {
            let o = lock(&self.shared.outbox);
            (o.len(), o.dropped())
        };
        let for_d = st.changed_at.elapsed();
        let down = (!st.connected && for_d > self.settings.keepalive).then(|| {
            format!(
                "fleet link down for {} s: {}",
                for_d.as_secs(),
                st.last_error.as_deref().unwrap_or("not connected yet")
            )
        });
        LinkStatus {
            broker: self.settings.broker.clone(),
            vehicle_id: self.settings.vehicle_id.clone(),
            prefix: self.settings.topics.prefix.clone(),
            connected: st.connected,
            for_s: for_d.as_secs_f64(),
            connects: st.connects,
            disconnects: st.disconnects,
            published: st.published,
            acknowledged: st.acknowledged,
            queued,
            dropped: dropped + st.oversize,
            last_error: st.last_error.clone(),
            down,
            commands_run: st.commands.run,
            commands_rejected: st.commands.rejected,
        }
    }

    /// Queues a message for `<prefix>/<suffix>` (QoS 1); sent once the link
    /// is up, the oldest dropped first when too many wait.
    pub fn publish(&self, suffix: &str, payload: Vec<u8>, retain: bool) {
        lock(&self.shared.outbox).push(Message {
            topic: format!("{}/{suffix}", self.settings.topics.prefix),
            payload,
            retain,
        });
    }
}

/// The running link; stopped cleanly (an offline message, then DISCONNECT,
/// so the broker does not send the last will) by [`Link::stop`].
pub struct Link {
    handle: LinkHandle,
    client: Client,
    stop_publisher: Arc<AtomicBool>,
    stop_io: Arc<AtomicBool>,
    io_done: Arc<AtomicBool>,
    publisher: Option<JoinHandle<()>>,
    io: Option<JoinHandle<()>>,
    worker: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("handle", &self.handle)
            .finish_non_exhaustive()
    }
}

/// The retained payload of `<prefix>/connection`.
fn connection_payload(vehicle: &str, online: bool, reason: Option<&str>) -> Vec<u8> {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut v = serde_json::json!({ "vehicle": vehicle, "online": online, "at": since });
    if let Some(r) = reason {
        v["reason"] = r.into();
    }
    v.to_string().into_bytes()
}

impl Link {
    /// Connects (in the background: a broker that is down is tried again
    /// with backoff, never an error here) and starts publishing `feed`'s
    /// status; with `commands`, takes the fleet's commands on
    /// `<prefix>/cmd` and answers on `<prefix>/reply`. Errors are the
    /// configuration's: the TLS files, the command journal.
    pub fn start(
        settings: Settings,
        feed: StatusFeed,
        commands: Option<Arc<dyn Commands>>,
    ) -> Result<Link, RemoteError> {
        let tls = crate::tls::client_config(&settings)?;
        let journal = match &commands {
            Some(_) => Some(
                Journal::open(&settings.journal).map_err(|e| RemoteError::File {
                    path: settings.journal.clone(),
                    message: format!(
                        "remote.journal: {e}: name a writable file on the data partition (not a \
                     symbolic link), or \"\" to keep the ids in memory"
                    ),
                })?,
            ),
            None => None,
        };
        let mut opts = MqttOptions::new(&settings.vehicle_id, &settings.host, settings.port);
        opts.set_keep_alive(settings.keepalive)
            // A persistent session: what was in flight when the link broke
            // is delivered after it comes back (QoS 1), and so are the
            // commands sent meanwhile.
            .set_clean_session(false)
            .set_max_packet_size(MAX_INCOMING, MAX_PAYLOAD + 1024)
            .set_request_channel_capacity(REQUEST_CHANNEL)
            // A command is acknowledged once its id is journaled: a crash
            // before that gets it delivered again, and the journal keeps
            // it from running twice.
            .set_manual_acks(true)
            .set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(tls)))
            .set_last_will(LastWill::new(
                &settings.topics.connection,
                connection_payload(&settings.vehicle_id, false, Some("link lost")),
                QoS::AtLeastOnce,
                true,
            ));
        let (client, connection) = Client::new(opts, REQUEST_CHANNEL);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                connected: false,
                changed_at: Instant::now(),
                connects: 0,
                disconnects: 0,
                published: 0,
                acknowledged: 0,
                oversize: 0,
                last_error: None,
                announce: false,
                commands: Counts::default(),
            }),
            outbox: Mutex::new(Outbox::new(settings.queue)),
        });
        let handle = LinkHandle {
            shared,
            settings: Arc::new(settings),
        };
        let (cmd_tx, worker) = match (commands, journal) {
            (Some(commands), Some(journal)) => {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Publish>(COMMAND_QUEUE);
                let mut handler = Handler {
                    commands,
                    allow: handle.settings.allow.clone(),
                    journal,
                    broker: handle.settings.broker.clone(),
                };
                let (h, c) = (handle.clone(), client.clone());
                let worker = std::thread::Builder::new()
                    .name("edgerec-remote-cmd".into())
                    .spawn(move || run_commands(&rx, &mut handler, &h, &c))
                    .map_err(RemoteError::Thread)?;
                (Some(tx), Some(worker))
            }
            _ => (None, None),
        };
        let stop_io = Arc::new(AtomicBool::new(false));
        let io_done = Arc::new(AtomicBool::new(false));
        let io = {
            let (h, stop, done) = (handle.clone(), stop_io.clone(), io_done.clone());
            let c = client.clone();
            std::thread::Builder::new()
                .name("edgerec-remote-io".into())
                .spawn(move || {
                    run_io(connection, &h, &stop, cmd_tx, &c);
                    done.store(true, Ordering::Release);
                })
                .map_err(RemoteError::Thread)?
        };
        let commands_on = worker.is_some();
        let stop_publisher = Arc::new(AtomicBool::new(false));
        let publisher = {
            let (h, c, stop) = (handle.clone(), client.clone(), stop_publisher.clone());
            std::thread::Builder::new()
                .name("edgerec-remote".into())
                .spawn(move || run_publisher(&c, &h, feed, &stop, commands_on))
        };
        let publisher = match publisher {
            Ok(p) => p,
            Err(e) => {
                stop_io.store(true, Ordering::Release);
                let _ = io.join();
                return Err(RemoteError::Thread(e));
            }
        };
        tracing::info!(
            broker = %handle.settings.broker,
            vehicle = %handle.settings.vehicle_id,
            prefix = %handle.settings.topics.prefix,
            "fleet link: connecting"
        );
        Ok(Link {
            handle,
            client,
            stop_publisher,
            stop_io,
            io_done,
            publisher: Some(publisher),
            io: Some(io),
            worker,
        })
    }

    /// A handle for the status and for queuing messages.
    pub fn handle(&self) -> LinkHandle {
        self.handle.clone()
    }

    /// Stops: while connected, the retained offline message and a
    /// DISCONNECT (the broker then keeps the last will to itself), waiting
    /// at most 2 s for them to leave; then the threads end.
    pub fn stop(mut self) {
        self.stop_publisher.store(true, Ordering::Release);
        if let Some(p) = self.publisher.take() {
            let _ = p.join();
        }
        let connected = lock(&self.handle.shared.state).connected;
        if connected {
            let offline =
                connection_payload(&self.handle.settings.vehicle_id, false, Some("stopped"));
            let _ = self.client.try_publish(
                self.handle.settings.topics.connection.clone(),
                QoS::AtLeastOnce,
                true,
                offline,
            );
            let _ = self.client.try_disconnect();
            let deadline = Instant::now() + STOP_GRACE;
            while !self.io_done.load(Ordering::Acquire) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.stop_io.store(true, Ordering::Release);
        if let Some(io) = self.io.take() {
            let _ = io.join();
        }
        // The I/O thread held the command queue's sender: the command
        // thread ends once it has answered what was queued.
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
        tracing::info!("fleet link: stopped");
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.stop_publisher.store(true, Ordering::Release);
        self.stop_io.store(true, Ordering::Release);
    }
}

/// What a failed or ended connection says, with the fix where it is
/// clear.
fn describe(e: &ConnectionError) -> String {
    match e {
        ConnectionError::ConnectionRefused(ConnectReturnCode::NotAuthorized)
        | ConnectionError::ConnectionRefused(ConnectReturnCode::BadUserNamePassword) => {
            "the broker refused this vehicle (not authorized): check that the fleet's ACL \
             knows its certificate"
                .to_owned()
        }
        ConnectionError::ConnectionRefused(ConnectReturnCode::BadClientId) => {
            "the broker refused the client id (remote.vehicle_id)".to_owned()
        }
        other => other.to_string(),
    }
}

/// Doubling waits with ±20 % jitter, so a fleet that lost its broker does
/// not come back all at once.
struct Backoff {
    next: Duration,
    seed: u64,
}

impl Backoff {
    fn new() -> Backoff {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            ^ u64::from(std::process::id()).rotate_left(32);
        Backoff {
            next: BACKOFF_MIN,
            seed: seed | 1,
        }
    }

    fn reset(&mut self) {
        self.next = BACKOFF_MIN;
    }

    fn wait(&mut self) -> Duration {
        // xorshift64: enough to spread a fleet's reconnects.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let factor = 0.8 + (self.seed % 1000) as f64 / 2500.0;
        let d = self.next.mul_f64(factor);
        self.next = (self.next * 2).min(BACKOFF_MAX);
        d
    }
}

/// Answers the fleet's commands one at a time, each acknowledged to the
/// broker once its outcome is durable.
fn run_commands(
    rx: &std::sync::mpsc::Receiver<Publish>,
    handler: &mut Handler,
    h: &LinkHandle,
    client: &Client,
) {
    while let Ok(p) = rx.recv() {
        let mut counts = Counts::default();
        handler.handle(&p.payload, &mut counts, &mut |reply| {
            h.publish("reply", reply.to_string().into_bytes(), false);
        });
        {
            let mut st = lock(&h.shared.state);
            st.commands.run += counts.run;
            st.commands.rejected += counts.rejected;
        }
        ack(client, &p);
    }
}

/// Acknowledges `p`, waiting up to 2 s for room in the request channel;
/// past it the broker delivers it again after the next reconnect (and the
/// journal answers the repeat).
fn ack(client: &Client, p: &Publish) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while client.try_ack(p).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run_io(
    mut connection: Connection,
    h: &LinkHandle,
    stop: &AtomicBool,
    commands: Option<std::sync::mpsc::SyncSender<Publish>>,
    client: &Client,
) {
    let mut backoff = Backoff::new();
    let broker = h.settings.broker.clone();
    while !stop.load(Ordering::Acquire) {
        let event = match connection.recv_timeout(Duration::from_millis(200)) {
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
            Ok(e) => e,
        };
        match event {
            Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                let mut st = lock(&h.shared.state);
                st.connected = true;
                st.changed_at = Instant::now();
                st.connects += 1;
                st.announce = true;
                backoff.reset();
                tracing::info!(%broker, session_present = ack.session_present, "fleet link: connected");
            }
            Ok(Event::Incoming(Packet::PubAck(_))) => {
                lock(&h.shared.state).acknowledged += 1;
            }
            Ok(Event::Incoming(Packet::Publish(p))) => {
                let for_us = p.topic == h.settings.topics.cmd;
                match (&commands, for_us) {
                    (Some(tx), true) => {
                        if let Err(std::sync::mpsc::TrySendError::Full(p)) = tx.try_send(p) {
                            lock(&h.shared.state).commands.rejected += 1;
                            tracing::warn!(
                                "fleet link: {COMMAND_QUEUE} commands wait already; one is dropped unanswered (the broker delivers it again after a reconnect)"
                            );
                            let _ = client.try_ack(&p);
                        }
                    }
                    // Not a topic this link takes (the session may hold an
                    // old subscription): acknowledged and passed over.
                    _ => {
                        let _ = client.try_ack(&p);
                    }
                }
            }
            // Our own DISCONNECT (a clean stop) has left.
            Ok(Event::Outgoing(Outgoing::Disconnect)) => break,
            Ok(_) => {}
            Err(e) => {
                let why = describe(&e);
                let was = {
                    let mut st = lock(&h.shared.state);
                    let was = st.connected;
                    if was {
                        st.connected = false;
                        st.changed_at = Instant::now();
                        st.disconnects += 1;
                    }
                    let repeated = st.last_error.as_deref() == Some(why.as_str());
                    st.last_error = Some(why.clone());
                    (was, repeated)
                };
                let wait = backoff.wait();
                match was {
                    (true, _) => {
                        tracing::warn!(%broker, error = %why, "fleet link: lost; reconnecting")
                    }
                    (false, false) => {
                        tracing::warn!(%broker, error = %why, retry_in_s = wait.as_secs_f64(), "fleet link: cannot connect")
                    }
                    (false, true) => {
                        tracing::debug!(%broker, error = %why, "fleet link: cannot connect")
                    }
                }
                let until = Instant::now() + wait;
                while Instant::now() < until && !stop.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
}

fn run_publisher(
    client: &Client,
    h: &LinkHandle,
    mut feed: StatusFeed,
    stop: &AtomicBool,
    commands_on: bool,
) {
    let topics = &h.settings.topics;
    let mut next_status = Instant::now();
    let mut next_look = Instant::now();
    let mut published_status: Option<String> = None;
    let mut pending: Option<String> = None;
    let mut alerts = crate::alerts::Alerts::default();
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(TICK);
        let (connected, announce) = {
            let st = lock(&h.shared.state);
            (st.connected, st.announce)
        };
        // The snapshot, once a second: alerts from each, the retained
        // status at most every status_interval.
        let now = Instant::now();
        if now >= next_look {
            next_look = now + ALERT_LOOK;
            if let Some(json) = feed() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&json) {
                    for ev in alerts.observe(&v, now, crate::unix_ms()) {
                        h.publish("alerts", ev.to_string().into_bytes(), false);
                    }
                }
                if now >= next_status {
                    next_status = now + h.settings.status_interval;
                    if published_status.as_ref() != Some(&json) {
                        pending = Some(json);
                    }
                }
            }
        }
        if !connected {
            continue;
        }
        if announce {
            if commands_on
                && client
                    .try_subscribe(topics.cmd.clone(), QoS::AtLeastOnce)
                    .is_err()
            {
                // The request channel is full: next tick.
                continue;
            }
            let online = connection_payload(&h.settings.vehicle_id, true, None);
            if client
                .try_publish(topics.connection.clone(), QoS::AtLeastOnce, true, online)
                .is_ok()
            {
                let mut st = lock(&h.shared.state);
                st.announce = false;
                st.published += 1;
            }
        }
        if let Some(json) = pending.take() {
            if json.len() > MAX_PAYLOAD {
                let mut st = lock(&h.shared.state);
                st.oversize += 1;
                st.last_error = Some(format!(
                    "a status of {} bytes is over the {MAX_PAYLOAD}-byte limit: not sent",
                    json.len()
                ));
            } else {
                match client.try_publish(
                    topics.status.clone(),
                    QoS::AtLeastOnce,
                    true,
                    json.clone().into_bytes(),
                ) {
                    Ok(()) => {
                        lock(&h.shared.state).published += 1;
                        published_status = Some(json);
                    }
                    // The request channel is full: next tick.
                    Err(_) => pending = Some(json),
                }
            }
        }
        loop {
            let m = {
                let o = lock(&h.shared.outbox);
                match o.front() {
                    Some(m) => m.clone(),
                    None => break,
                }
            };
            if client
                .try_publish(m.topic, QoS::AtLeastOnce, m.retain, m.payload)
                .is_err()
            {
                break;
            }
            lock(&h.shared.outbox).pop();
            lock(&h.shared.state).published += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_with_jitter() {
        let mut b = Backoff::new();
        let waits: Vec<Duration> = (0..8).map(|_| b.wait()).collect();
        assert!(waits[0] >= Duration::from_millis(800) && waits[0] <= Duration::from_millis(1200));
        assert!(waits[1] >= Duration::from_millis(1600) && waits[1] <= Duration::from_millis(2400));
        assert!(waits[7] <= BACKOFF_MAX.mul_f64(1.2) && waits[7] >= BACKOFF_MAX.mul_f64(0.8));
        b.reset();
        assert!(b.wait() <= Duration::from_millis(1200));
    }

    #[test]
    fn connection_payload_says_online_and_why_not() {
        let v: serde_json::Value =
            serde_json::from_slice(&connection_payload("r7", false, Some("link lost"))).unwrap();
        assert_eq!(v["vehicle"], "r7");
        assert_eq!(v["online"], false);
        assert_eq!(v["reason"], "link lost");
        let v: serde_json::Value =
            serde_json::from_slice(&connection_payload("r7", true, None)).unwrap();
        assert_eq!(v["online"], true);
        assert!(v.get("reason").is_none());
    }
}
