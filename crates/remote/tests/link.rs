//! The link against a real broker: Debian's Mosquitto on loopback, TLS
//! with certificates the test's CA signed, an ACL per vehicle, the fleet's
//! side a PyPI paho-mqtt client (`edgerec_testkit::mqtt`).

use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_remote::topics::Topics;
use edgerec_remote::{Link, LinkHandle, Settings};
use edgerec_testkit::mqtt::{mosquitto, Broker};

const VEHICLE: &str = "robot-7";

fn have_tools() -> bool {
    if mosquitto().is_none() {
        edgerec_testkit::skip::skip("mosquitto is not installed (scripts/test installs it)");
        return false;
    }
    true
}

fn settings(b: &Broker, cert: &str) -> Settings {
    Settings {
        broker: format!("mqtts://127.0.0.1:{}", b.port),
        host: "127.0.0.1".into(),
        port: b.port,
        ca_file: b.tls.join("ca.pem"),
        cert_file: b.tls.join(format!("{cert}.pem")),
        key_file: b.tls.join(format!("{cert}.key")),
        vehicle_id: VEHICLE.into(),
        topics: Topics::new(&format!("edgerec/{VEHICLE}")),
        keepalive: Duration::from_secs(5),
        status_interval: Duration::from_secs(1),
        queue: 100,
        allow: vec![],
        journal: std::path::PathBuf::new(),
    }
}

/// A status that changes at every call: `{"n": calls}`.
fn counting_feed() -> (Arc<AtomicU64>, edgerec_remote::link::StatusFeed) {
    let n = Arc::new(AtomicU64::new(0));
    let m = n.clone();
    (
        n,
        Box::new(move || {
            Some(format!(
                "{{\"n\":{}}}",
                m.fetch_add(1, Ordering::SeqCst) + 1
            ))
        }),
    )
}

fn wait_for(
    what: &str,
    limit: Duration,
    h: &LinkHandle,
    ok: impl Fn(&edgerec_remote::LinkStatus) -> bool,
) {
    let deadline = Instant::now() + limit;
    loop {
        let st = h.status();
        if ok(&st) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} within {limit:?}: {st:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_status_is_retained_and_the_vehicle_marked_online_then_stopped() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), VEHICLE);
    let mut fleet = broker.watch("edgerec/robot-7/#", "fleet");
    let (_, feed) = counting_feed();
    let link = Link::start(settings(&broker, "vehicle"), feed, None).expect("link");
    let h = link.handle();
    let online = fleet
        .until(Duration::from_secs(20), |t, p| {
            t == "edgerec/robot-7/connection" && p["online"] == true
        })
        .unwrap_or_else(|| {
            panic!(
                "no online message: {:#?}\n{}",
                h.status(),
                broker.log_text()
            )
        });
    assert_eq!(online["vehicle"], VEHICLE);
    let first = fleet
        .until(Duration::from_secs(10), |t, _| {
            t == "edgerec/robot-7/status"
        })
        .expect("a status");
    assert!(first["n"].as_u64().is_some(), "{first}");
    // At most one a status_interval (1 s): over 3 s, 2 to 5 of them.
    let t0 = Instant::now();
    let mut count = 0;
    while t0.elapsed() < Duration::from_secs(3) {
        if fleet
            .until(Duration::from_millis(200), |t, _| {
                t == "edgerec/robot-7/status"
            })
            .is_some()
        {
            count += 1;
        }
    }
    assert!(
        (2..=5).contains(&count),
        "{count} statuses in 3 s at a 1 s interval"
    );
    let st = h.status();
    assert!(
        st.connected && st.connects == 1 && st.down.is_none(),
        "{st:#?}"
    );
    assert!(st.published >= 3 && st.acknowledged >= 1, "{st:#?}");

    // A fleet client that comes later gets both, retained (in either
    // order).
    let mut late = broker.watch("edgerec/robot-7/#", "fleet");
    let (mut status, mut conn) = (None, None);
    let deadline = Instant::now() + Duration::from_secs(10);
    while (status.is_none() || conn.is_none()) && Instant::now() < deadline {
        let Some(m) = late.until(Duration::from_millis(500), |t, p| {
            (t.ends_with("/status") || t.ends_with("/connection")) && p.is_object()
        }) else {
            continue;
        };
        if m.get("online").is_some() {
            conn = Some(m);
        } else {
            status = Some(m);
        }
    }
    let status = status.expect("the retained status");
    assert_eq!(status["_retain"], true, "{status}");
    let conn = conn.expect("the retained connection");
    assert_eq!(
        (conn["online"].clone(), conn["_retain"].clone()),
        (true.into(), true.into())
    );

    // A clean stop: "stopped", and a DISCONNECT (no last will).
    link.stop();
    let off = fleet
        .until(Duration::from_secs(10), |t, p| {
            t == "edgerec/robot-7/connection" && p["online"] == false
        })
        .expect("the offline message");
    assert_eq!(off["reason"], "stopped", "{off}");
    let log = broker.log_text();
    assert!(
        log.contains("Client robot-7 disconnected."),
        "no clean DISCONNECT in the broker's log:\n{log}"
    );
}

#[test]
fn after_a_broker_restart_the_link_comes_back_and_the_status_is_current() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(dir.path(), VEHICLE);
    let (calls, feed) = counting_feed();
    let link = Link::start(settings(&broker, "vehicle"), feed, None).expect("link");
    let h = link.handle();
    wait_for("connected", Duration::from_secs(20), &h, |s| {
        s.connected && s.published >= 2
    });

    broker.kill();
    wait_for("the loss seen", Duration::from_secs(15), &h, |s| {
        !s.connected && s.disconnects == 1
    });
    let st = h.status();
    assert!(
        st.last_error.is_some() && st.down.is_none(),
        "down only after the keepalive: {st:#?}"
    );
    std::thread::sleep(Duration::from_secs(2));
    broker.start_again();
    wait_for("reconnected", Duration::from_secs(40), &h, |s| {
        s.connected && s.connects == 2
    });
    let after = calls.load(Ordering::SeqCst);
    // Within one interval (1 s) and a tick of the reconnect, the retained
    // status is one made after the link came back.
    std::thread::sleep(Duration::from_millis(1500));
    let mut fleet = broker.watch("edgerec/robot-7/status", "fleet");
    let status = fleet
        .until(Duration::from_secs(5), |_, _| true)
        .expect("the retained status");
    assert!(
        status["n"].as_u64().unwrap_or(0) >= after,
        "retained status {status} is older than the reconnect (feed call {after})"
    );
    link.stop();
}

#[test]
fn a_certificate_the_broker_does_not_trust_never_connects_and_says_why() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), VEHICLE);
    let (_, feed) = counting_feed();
    let link = Link::start(settings(&broker, "stranger/client"), feed, None).expect("link");
    let h = link.handle();
    // keepalive 5 s: down is said past it, with the reason.
    wait_for("the link said down", Duration::from_secs(20), &h, |s| {
        s.down.is_some()
    });
    let st = h.status();
    assert!(
        !st.connected && st.connects == 0 && st.published == 0,
        "{st:#?}"
    );
    let why = st.last_error.clone().unwrap_or_default();
    assert!(!why.is_empty(), "{st:#?}");
    assert!(st.down.as_deref().unwrap_or("").contains(&why), "{st:#?}");
    link.stop();
}

#[test]
fn a_key_others_can_read_is_refused_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    if !have_tools() {
        return;
    }
    let broker = Broker::start(dir.path(), VEHICLE);
    let s = settings(&broker, "vehicle");
    std::fs::set_permissions(&s.key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_, feed) = counting_feed();
    let e = Link::start(s, feed, None).expect_err("a world-readable key");
    assert!(e.to_string().contains("chmod 600"), "{e}");
}

/// The fleet's side of commands, recorded.
#[derive(Default)]
struct Ran(std::sync::Mutex<Vec<String>>);

impl edgerec_remote::commands::Commands for Ran {
    fn run(
        &self,
        command: &edgerec_ros::control::Command,
        _: &edgerec_ros::rate_limit::Requester,
    ) -> edgerec_ros::control::Reply {
        self.0.lock().unwrap().push(command.to_string());
        edgerec_ros::control::Reply {
            ok: true,
            paused: false,
            message: format!("ran {command}"),
        }
    }
    fn refused(
        &self,
        _: Option<&edgerec_ros::control::Command>,
        _: &str,
        _: &edgerec_ros::rate_limit::Requester,
        _: &str,
    ) {
    }
}

#[test]
fn a_command_queued_while_the_vehicle_was_away_runs_once_when_it_is_back() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), VEHICLE);
    let mut replies = broker.watch("edgerec/robot-7/reply", "fleet");
    let mut s = settings(&broker, "vehicle");
    s.allow = vec!["trigger".into(), "status".into()];
    s.journal = dir.path().join("remote-commands.jsonl");
    let ran = Arc::new(Ran::default());
    let (_, feed) = counting_feed();
    let link = Link::start(s.clone(), feed, Some(ran.clone())).expect("link");
    let h = link.handle();
    wait_for("connected", Duration::from_secs(20), &h, |s| {
        s.connected && s.published >= 1
    });
    // Subscribed once the online message is out; a moment for the SUBACK.
    std::thread::sleep(Duration::from_millis(500));

    assert!(broker.publish(
        "edgerec/robot-7/cmd",
        r#"{"id":"t-1","command":"trigger","reason":"near miss","pre":"5s"}"#,
        "fleet"
    ));
    let mut got = Vec::new();
    while got.len() < 2 {
        let r = replies
            .until(Duration::from_secs(10), |_, p| p["id"] == "t-1")
            .unwrap_or_else(|| panic!("replies to t-1: {got:?} {:#?}", h.status()));
        got.push(r["status"].as_str().unwrap_or("").to_owned());
    }
    assert_eq!(got, ["accepted", "done"]);
    // Not allowed here: refused, not run.
    assert!(broker.publish(
        "edgerec/robot-7/cmd",
        r#"{"id":"p-1","command":"pause"}"#,
        "fleet"
    ));
    let r = replies
        .until(Duration::from_secs(10), |_, p| p["id"] == "p-1")
        .expect("a reply to p-1");
    assert_eq!(r["status"], "rejected");
    assert!(
        r["reason"].as_str().unwrap().contains("remote.allow"),
        "{r}"
    );

    // The vehicle goes away without a DISCONNECT (its session stays at
    // the broker); the fleet sends a command and, by mistake, t-1 again.
    drop(link);
    std::thread::sleep(Duration::from_secs(1));
    assert!(broker.publish(
        "edgerec/robot-7/cmd",
        r#"{"id":"s-1","command":"status"}"#,
        "fleet"
    ));
    assert!(broker.publish(
        "edgerec/robot-7/cmd",
        r#"{"id":"t-1","command":"trigger","reason":"near miss","pre":"5s"}"#,
        "fleet"
    ));
    let (_, feed) = counting_feed();
    let link = Link::start(s, feed, Some(ran.clone())).expect("link again");
    let s1 = replies
        .until(Duration::from_secs(20), |_, p| {
            p["id"] == "s-1" && p["status"] == "done"
        })
        .expect("the queued command ran after the reconnect");
    assert_eq!(s1["result"], "ran status");
    let again = replies
        .until(Duration::from_secs(10), |_, p| p["id"] == "t-1")
        .expect("an answer to the repeat");
    assert_eq!(
        (again["status"].clone(), again["duplicate"].clone()),
        ("done".into(), true.into())
    );
    link.stop();
    assert_eq!(
        *ran.0.lock().unwrap(),
        ["trigger --pre 5s --reason near miss", "status"],
        "each command ran once"
    );
}

#[test]
fn alerts_are_raised_and_cleared_as_the_status_says() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), VEHICLE);
    let mut fleet = broker.watch("edgerec/robot-7/alerts", "fleet");
    let reasons = Arc::new(std::sync::Mutex::new(vec!["disk low".to_owned()]));
    let r = reasons.clone();
    let feed: edgerec_remote::link::StatusFeed = Box::new(move || {
        Some(serde_json::json!({"state": "degraded", "reasons": *r.lock().unwrap()}).to_string())
    });
    let link = Link::start(settings(&broker, "vehicle"), feed, None).expect("link");
    let raised = fleet
        .until(Duration::from_secs(20), |_, p| p["state"] == "raised")
        .unwrap_or_else(|| panic!("no alert: {:#?}", link.handle().status()));
    assert_eq!(
        (raised["alert"].as_str(), raised["kind"].as_str()),
        (Some("disk-low"), Some("disk-low"))
    );
    assert_eq!(raised["reason"], "disk low");
    reasons.lock().unwrap().clear();
    let t = Instant::now();
    let cleared = fleet
        .until(Duration::from_secs(20), |_, p| p["state"] == "cleared")
        .expect("the alert cleared");
    assert_eq!(cleared["alert"], "disk-low");
    // After the condition has been gone for 10 s, not before.
    assert!(t.elapsed() >= Duration::from_secs(9), "{:?}", t.elapsed());
    link.stop();
}
