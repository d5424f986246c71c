//! When the running recorder's offload may send (`offload.windows`,
//! `offload.interfaces`, `offload.metered_interfaces`): inside a time
//! window of the day, while the route to the store goes out through an
//! allowed interface (the depot's Wi-Fi), and only what matters (event
//! clips and the segments an event overlaps) while it goes out through a
//! metered one (the cellular modem). Which interface carries the traffic
//! is the kernel's own answer: a UDP socket connected to the store's
//! address (nothing is sent) is given the source address of the route,
//! and that address belongs to one interface.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};

use edgerec_config::TimeWindow;

/// The policy, from `[offload]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPolicy {
    /// Times of day it may send; empty = any.
    pub windows: Vec<TimeWindow>,
    /// Interfaces it may send over; empty = any.
    pub interfaces: Vec<String>,
    /// Interfaces over which only what matters goes.
    pub metered: Vec<String>,
}

/// What may be sent now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Everything.
    Open,
    /// Only event clips and the segments an event overlaps: the route
    /// goes out through this metered interface.
    Metered(String),
    /// Nothing, and why.
    Closed(String),
}

impl Link {
    /// One word for the status: `open`, `metered`, `closed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Link::Open => "open",
            Link::Metered(_) => "metered",
            Link::Closed(_) => "closed",
        }
    }
}

impl LinkPolicy {
    /// Whether the route matters (an interface is named).
    pub fn needs_route(&self) -> bool {
        !self.interfaces.is_empty() || !self.metered.is_empty()
    }

    /// What may go at `minute` after local midnight, with the route to
    /// the store going out through `route` (an interface, or why there is
    /// none; not asked when [`LinkPolicy::needs_route`] is false) whose
    /// state `up` tells.
    pub fn decide(
        &self,
        minute: u16,
        route: impl FnOnce() -> Result<String, String>,
        up: impl Fn(&str) -> bool,
    ) -> Link {
        if !self.windows.is_empty() && !self.windows.iter().any(|w| w.contains(minute)) {
            let list: Vec<String> = self.windows.iter().map(TimeWindow::text).collect();
            return Link::Closed(format!(
                "outside offload.windows ({}); local time {:02}:{:02}",
                list.join(", "),
                minute / 60,
                minute % 60
            ));
        }
        if !self.needs_route() {
            return Link::Open;
        }
        let iface = match route() {
            Ok(i) => i,
            Err(e) => return Link::Closed(format!("no route to the store: {e}")),
        };
        if !up(&iface) {
            return Link::Closed(format!("{iface}, the route to the store, is down"));
        }
        if !self.interfaces.is_empty() && !self.interfaces.contains(&iface) {
            return Link::Closed(format!(
                "the route to the store goes out through {iface}, not offload.interfaces ({})",
                self.interfaces.join(", ")
            ));
        }
        if self.metered.contains(&iface) {
            return Link::Metered(iface);
        }
        Link::Open
    }

    /// [`LinkPolicy::decide`] now, for the store at `endpoint`.
    pub fn now(&self, endpoint: &str) -> Link {
        self.decide(
            local_minute(),
            || route_interface(endpoint),
            interface_is_up,
        )
    }
}

/// Minutes after local midnight now (the vehicle's time zone: `TZ`, else
/// `/etc/localtime`).
pub fn local_minute() -> u16 {
    let now = jiff::Zoned::now();
    (now.hour().clamp(0, 23) as u16) * 60 + now.minute().clamp(0, 59) as u16
}

/// The interface the kernel routes traffic for the store at `endpoint`
/// (its URL) through.
pub fn route_interface(endpoint: &str) -> Result<String, String> {
    let url: url::Url = endpoint
        .parse()
        .map_err(|e| format!("offload.endpoint `{endpoint}`: {e}"))?;
    let host = url.host_str().ok_or("offload.endpoint has no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(443);
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} resolves to no address"))?;
    let local = source_address(addr).map_err(|e| format!("{host} ({}): {e}", addr.ip()))?;
    interface_of(local)?.ok_or_else(|| format!("no interface holds {local}, the route's source"))
}

/// The source address the kernel would use to reach `to` (a connected UDP
/// socket; nothing is sent).
fn source_address(to: SocketAddr) -> std::io::Result<IpAddr> {
    let any: SocketAddr = if to.is_ipv4() {
        "0.0.0.0:0".parse().map_err(std::io::Error::other)?
    } else {
        "[::]:0".parse().map_err(std::io::Error::other)?
    };
    let s = UdpSocket::bind(any)?;
    s.connect(to)?;
    Ok(s.local_addr()?.ip())
}

/// The interface that holds `addr`.
#[cfg(not(target_os = "linux"))]
fn interface_of(_addr: IpAddr) -> Result<Option<String>, String> {
    Err("offload.interfaces are looked up on Linux only".to_owned())
}

/// The interface that holds `addr`.
#[cfg(target_os = "linux")]
fn interface_of(addr: IpAddr) -> Result<Option<String>, String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(format!(
            "listing the interfaces: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut found = None;
    let mut p = list;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs gave, not yet freed;
        // its address, when not null, is a sockaddr of the family it says,
        // and its name a NUL-terminated string.
        unsafe {
            let ifa = &*p;
            let a = ifa.ifa_addr;
            if !a.is_null() {
                let ip = match (*a).sa_family as i32 {
                    libc::AF_INET => {
                        let sin = &*(a as *const libc::sockaddr_in);
                        Some(IpAddr::from(
                            u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                        ))
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(a as *const libc::sockaddr_in6);
                        Some(IpAddr::from(sin6.sin6_addr.s6_addr))
                    }
                    _ => None,
                };
                if ip == Some(addr) && !ifa.ifa_name.is_null() {
                    found = Some(
                        std::ffi::CStr::from_ptr(ifa.ifa_name)
                            .to_string_lossy()
                            .into_owned(),
                    );
                    break;
                }
            }
            p = ifa.ifa_next;
        }
    }
    // SAFETY: the list getifaddrs gave, freed once.
    unsafe { libc::freeifaddrs(list) };
    Ok(found)
}

/// The kernel's flag of an interface that is up (`IFF_UP`).
const IFF_UP: u32 = 0x1;

/// Whether `iface` is up: its operational state is `up`, or `unknown`
/// (loopback, tunnels: no carrier to report) with the link flagged up.
pub fn interface_is_up(iface: &str) -> bool {
    if iface.contains('/') || iface == "." || iface == ".." {
        return false;
    }
    let dir = std::path::Path::new("/sys/class/net").join(iface);
    let state = std::fs::read_to_string(dir.join("operstate")).unwrap_or_default();
    match state.trim() {
        "up" => true,
        "unknown" => std::fs::read_to_string(dir.join("flags"))
            .ok()
            .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
            .is_some_and(|f| f & IFF_UP != 0),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(windows: &[(u16, u16)], interfaces: &[&str], metered: &[&str]) -> LinkPolicy {
        LinkPolicy {
            windows: windows
                .iter()
                .map(|&(start, end)| TimeWindow { start, end })
                .collect(),
            interfaces: interfaces.iter().map(|s| s.to_string()).collect(),
            metered: metered.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn windows_interfaces_and_metered_links_decide_in_that_order() {
        let p = policy(&[(22 * 60, 6 * 60)], &["wlan0", "wwan0"], &["wwan0"]);
        let up = |_: &str| true;
        // Noon: outside the window, whatever the route.
        let noon = p.decide(12 * 60, || panic!("the route is not asked"), up);
        assert!(
            matches!(&noon, Link::Closed(w) if w.contains("outside offload.windows (22:00-06:00); local time 12:00")),
            "{noon:?}"
        );
        assert_eq!(p.decide(23 * 60, || Ok("wlan0".into()), up), Link::Open);
        assert_eq!(
            p.decide(1, || Ok("wwan0".into()), up),
            Link::Metered("wwan0".into())
        );
        let eth = p.decide(1, || Ok("eth1".into()), up);
        assert!(
            matches!(&eth, Link::Closed(w) if w.contains("through eth1, not offload.interfaces (wlan0, wwan0)")),
            "{eth:?}"
        );
        let none = p.decide(1, || Err("network is unreachable".into()), up);
        assert!(
            matches!(&none, Link::Closed(w) if w.contains("no route to the store: network is unreachable")),
            "{none:?}"
        );
        let down = p.decide(1, || Ok("wlan0".into()), |_| false);
        assert!(
            matches!(&down, Link::Closed(w) if w.contains("wlan0, the route to the store, is down")),
            "{down:?}"
        );
        // Nothing named: open, and the route is never looked up.
        assert_eq!(
            policy(&[], &[], &[]).decide(600, || panic!("not asked"), up),
            Link::Open
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_route_to_a_loopback_store_goes_out_through_lo() {
        assert_eq!(
            route_interface("http://127.0.0.1:9000").as_deref(),
            Ok("lo")
        );
        assert!(interface_is_up("lo"));
        assert!(!interface_is_up("no-such-if0"));
        assert!(!interface_is_up("../lo"));
        let m = local_minute();
        assert!(m < 24 * 60);
        assert!(route_interface("not a url").is_err());
    }
}
