//! `docs/remote-commands.schema.json`, the fleet's contract, says what the
//! parser takes: the same commands and fields, and (checked with PyPI
//! `jsonschema`, which moto[server] brings into the test venv) the same
//! verdict on examples, and the replies the handler makes fit it.

use std::process::Command;
use std::sync::Arc;

use edgerec_remote::command::{parse, COMMON, TRIGGER};
use edgerec_remote::commands::{Commands, Counts, Handler};
use edgerec_remote::journal::Journal;
use edgerec_ros::control::{Command as Cmd, Reply};
use edgerec_ros::rate_limit::Requester;
use serde_json::Value;

fn schema() -> Value {
    let p = edgerec_testkit::workspace_root().join("docs/remote-commands.schema.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

#[test]
fn the_schema_names_the_commands_and_fields_the_parser_takes() {
    let s = schema();
    let defs = &s["$defs"];
    let commands: Vec<&str> = defs["common"]["properties"]["command"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(commands, edgerec_config::remote::REMOTE_COMMANDS);
    let mut common: Vec<String> = COMMON.iter().map(|s| s.to_string()).collect();
    common.sort();
    assert_eq!(keys(&defs["common"]["properties"]), common);
    let mut all = common.clone();
    all.extend(TRIGGER.iter().map(|s| s.to_string()));
    all.sort();
    assert_eq!(keys(&defs["command"]["oneOf"][1]["properties"]), all);
    assert_eq!(keys(&defs["command"]["oneOf"][0]["properties"]), common);
}

struct Ok_;
impl Commands for Ok_ {
    fn run(&self, c: &Cmd, _: &Requester) -> Reply {
        Reply {
            ok: !matches!(c, Cmd::Split),
            paused: false,
            message: match c {
                Cmd::List => r#"{"sessions":[]}"#.into(),
                Cmd::Split => "no".into(),
                _ => "fine".into(),
            },
        }
    }
    fn refused(&self, _: Option<&Cmd>, _: &str, _: &Requester, _: &str) {}
}

#[test]
fn examples_get_the_same_verdict_and_replies_fit() {
    let Some(py) = edgerec_testkit::python() else {
        edgerec_testkit::skip::skip("the schema check: no Python readers (.venv)");
        return;
    };
    let accepted = [
        r#"{"id":"a","command":"pause"}"#,
        r#"{"id":"c:0193","command":"trigger","issued_at":"2026-12-07T10:02:00Z","expires_at":1796638020.5,"issued_by":"ops/alice","reason":"near miss","name":"gate3","pre":"30s","post":10}"#,
        r#"{"id":"l.1","command":"list","issued_by":null}"#,
        r#"{"id":"t","command":"trigger","pre":"500ms","post":"2min"}"#,
    ];
    let rejected = [
        r#"{"command":"pause"}"#,
        r#"{"id":"a b","command":"pause"}"#,
        r#"{"id":"x","command":"reboot"}"#,
        r#"{"id":"x","command":"pause","reason":"why"}"#,
        r#"{"id":"x","command":"trigger","name":"a/b"}"#,
        r#"{"id":"x","command":"trigger","post":7200}"#,
        r#"{"id":"x","command":"trigger","reason":"a\nb"}"#,
        r#"[1]"#,
    ];
    for a in accepted {
        assert!(parse(a.as_bytes()).is_ok(), "the parser refuses {a}");
    }
    for r in rejected {
        assert!(parse(r.as_bytes()).is_err(), "the parser takes {r}");
    }
    // Replies, as the handler makes them.
    let mut h = Handler {
        commands: Arc::new(Ok_),
        allow: vec!["trigger".into(), "list".into(), "split".into()],
        journal: Journal::in_memory(),
        broker: "mqtts://b".into(),
    };
    let mut replies = Vec::new();
    for p in [
        r#"{"id":"t","command":"trigger"}"#,
        r#"{"id":"t","command":"trigger"}"#,
        r#"{"id":"l","command":"list"}"#,
        r#"{"id":"s","command":"split"}"#,
        r#"{"id":"p","command":"pause"}"#,
        "junk",
    ] {
        h.handle(p.as_bytes(), &mut Counts::default(), &mut |v| {
            replies.push(v)
        });
    }
    let statuses: Vec<&str> = replies
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "accepted", "done", "done", "accepted", "done", "accepted", "failed", "rejected",
            "rejected"
        ]
    );
    let script = r#"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
cases = json.load(sys.stdin)
reply = dict(schema["$defs"]["reply"], **{"$defs": schema["$defs"]})
out = []
for kind, text in cases:
    doc = json.loads(text) if kind != "reply" else text
    try:
        jsonschema.validate(doc, reply if kind == "reply" else schema)
        out.append(True)
    except jsonschema.ValidationError:
        out.append(False)
print(json.dumps(out))
"#;
    let mut cases: Vec<Value> = Vec::new();
    cases.extend(accepted.iter().map(|a| serde_json::json!(["command", a])));
    cases.extend(rejected.iter().map(|r| serde_json::json!(["command", r])));
    cases.extend(replies.iter().map(|r| serde_json::json!(["reply", r])));
    let mut child = Command::new(py)
        .args(["-c", script])
        .arg(edgerec_testkit::workspace_root().join("docs/remote-commands.schema.json"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(Value::Array(cases).to_string().as_bytes())
            .unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "jsonschema: {o:?}");
    let verdicts: Vec<bool> = serde_json::from_slice(&o.stdout).unwrap();
    let (a, rest) = verdicts.split_at(accepted.len());
    let (r, rep) = rest.split_at(rejected.len());
    assert!(
        a.iter().all(|v| *v),
        "the schema refuses one the parser takes: {a:?}"
    );
    for (text, v) in rejected.iter().zip(r) {
        assert!(!v, "the schema takes {text}, which the parser refuses");
    }
    assert!(
        rep.iter().all(|v| *v),
        "a reply does not fit the schema: {rep:?} {replies:#?}"
    );
}
