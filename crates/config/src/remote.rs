//! The readers and checks of `[remote]`: the broker's URL and the topic
//! prefix, each refused with what is wrong and an example that is right.

use crate::document::{Cx, Field, Table};
use crate::schema::Result;

/// `remote.broker`: empty, or `mqtts://HOST[:PORT]` (a name, an IPv4
/// address or a bracketed IPv6 one; port 1 to 65535).
pub(crate) fn broker_url(cx: &Cx, field: &Field) -> Result<String> {
    let url = cx.string(field)?;
    if url.is_empty() {
        return Ok(String::new());
    }
    match parse_broker(url) {
        Ok(_) => Ok(url.to_owned()),
        Err(why) => Err(cx.at(
            field,
            format!("`{url}` is not a broker's URL: {why}"),
            Some(
                "write e.g. \"mqtts://mqtt.fleet.example:8883\" (MQTT over TLS; the port \
                 defaults to 8883)"
                    .to_owned(),
            ),
        )),
    }
}

/// `mqtts://HOST[:PORT]` as host and port (8883 when left out); the
/// error says what is wrong.
pub fn parse_broker(url: &str) -> std::result::Result<(String, u16), &'static str> {
    if url.starts_with("mqtt://") || url.starts_with("tcp://") {
        return Err("the link is MQTT over TLS only (mqtts://): a vehicle's commands and status must not cross the network in the clear");
    }
    let Some(rest) = url.strip_prefix("mqtts://") else {
        return Err("a broker's URL starts with mqtts://");
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return Err(
            "the URL holds a path, a query or user information; the broker is only HOST:PORT",
        );
    }
    if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the URL holds white space");
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return Err("an IPv6 address is written in brackets: [2001:db8::1]:8883");
        };
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err("the bracketed host is not an IPv6 address");
        }
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or("after ] comes :PORT or nothing")?,
            ),
        };
        (addr, port)
    } else {
        match rest.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host");
    }
    let hostname_ok = host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if !rest.starts_with('[') && !hostname_ok {
        return Err("the host is not a host name or an IPv4 address");
    }
    let port = match port {
        None => 8883,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return Err("the port is not a number from 1 to 65535"),
        },
    };
    Ok((host.to_owned(), port))
}

/// `remote.topic_prefix`: empty (`edgerec/<vehicle_id>`), or MQTT topic
/// levels without wildcards, not starting with `$` or `/`, no empty level,
/// at most 200 bytes.
pub(crate) fn topic_prefix(cx: &Cx, field: &Field) -> Result<String> {
    let prefix = cx.string(field)?;
    if prefix.is_empty() {
        return Ok(String::new());
    }
    let bad = if prefix.len() > 200 {
        Some("longer than 200 bytes")
    } else if prefix.contains(['+', '#']) {
        Some("it holds a wildcard (+ or #)")
    } else if prefix.starts_with('$') {
        Some("topics starting with $ are the broker's")
    } else if prefix.split('/').any(str::is_empty) {
        Some("it has an empty level (a leading, trailing or doubled /)")
    } else if prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Some("it holds white space or a control character")
    } else {
        None
    };
    match bad {
        Some(why) => Err(cx.at(
            field,
            format!("`{prefix}` is not a topic prefix: {why}"),
            Some("write levels separated by / (\"fleet/eu/robot-07\"), or \"\" for edgerec/<vehicle_id>".to_owned()),
        )),
        None => Ok(prefix.to_owned()),
    }
}

/// The commands the fleet link can carry, in the order the docs list
/// them.
pub const REMOTE_COMMANDS: [&str; 6] = ["trigger", "pause", "resume", "split", "status", "list"];

/// `remote.allow`: commands of [`REMOTE_COMMANDS`], each once.
pub(crate) fn allowed_commands(cx: &Cx, field: &Field) -> Result<Vec<String>> {
    let list = crate::readers::string_list(cx, field)?;
    for (i, c) in list.iter().enumerate() {
        if !REMOTE_COMMANDS.contains(&c.as_str()) {
            return Err(cx.at(
                field,
                format!("`{c}` is not a command the fleet link carries"),
                Some(format!("use some of: {}", REMOTE_COMMANDS.join(", "))),
            ));
        }
        if list[..i].contains(c) {
            return Err(cx.at(field, format!("`{c}` is listed twice"), None));
        }
    }
    Ok(list)
}

/// A broker needs the vehicle's certificate and key (mutual TLS is the
/// link's perimeter).
pub(crate) fn check(cx: &Cx, table: &Table, config: &crate::RemoteConfig) -> Result<()> {
    if config.broker.is_empty() {
        return Ok(());
    }
    for (key, value) in [
        ("cert_file", &config.cert_file),
        ("key_file", &config.key_file),
    ] {
        if value.as_os_str().is_empty() {
            if let Some(field) = table.field("broker") {
                return Err(cx.at(
                    &field,
                    format!("remote.broker is set but remote.{key} is not"),
                    Some(
                        "the vehicle shows the broker its certificate (mutual TLS): set \
                         remote.cert_file and remote.key_file, or remote.broker = \"\""
                            .to_owned(),
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_broker;

    #[test]
    fn broker_urls() {
        assert_eq!(
            parse_broker("mqtts://mqtt.example:8884"),
            Ok(("mqtt.example".into(), 8884))
        );
        assert_eq!(
            parse_broker("mqtts://mqtt.example"),
            Ok(("mqtt.example".into(), 8883))
        );
        assert_eq!(
            parse_broker("mqtts://127.0.0.1:1883/"),
            Ok(("127.0.0.1".into(), 1883))
        );
        assert_eq!(parse_broker("mqtts://[::1]:9"), Ok(("::1".into(), 9)));
        for bad in [
            "mqtt://x:1883",
            "https://x",
            "mqtts://",
            "mqtts://x:0",
            "mqtts://x:70000",
            "mqtts://x/path",
            "mqtts://user@x",
            "mqtts://[::1",
            "mqtts://[nope]:1",
            "mqtts://a b",
            "mqtts://x..y",
        ] {
            assert!(parse_broker(bad).is_err(), "{bad}");
        }
    }
}
