//! Who may ask what of the control socket.
//!
//! The socket takes a connection from any local user; each request is
//! then allowed or refused by its peer as the kernel saw it connect
//! ([`Peer`]: `SO_PEERCRED` and `SO_PEERGROUPS`, which the peer cannot
//! forge). Two levels: reading (is-paused, the offload's status), for the
//! read group, and controlling (pause, resume, split, trigger, the
//! offload's pause, resume and retry), for the control group; root and
//! the recorder's own user may do both. A refusal names the group to join.

use crate::ctl::{user_name, Peer};

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// It only reads the recorder's state.
    Read,
    /// It changes what the recorder does.
    Control,
}

/// A group, by id and by the name the configuration gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its gid.
    pub gid: u32,
    /// Its name, for the refusal.
    pub name: String,
}

/// Who may read and who may control, from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The recorder's own user, allowed everything besides root.
    pub owner_uid: u32,
    /// Its members may control (and read).
    pub control: Group,
    /// Its members may read; `None`: only those who may control.
    pub read: Option<Group>,
}

/// A configured group this system does not have, or cannot look up.
#[derive(Debug, thiserror::Error)]
#[error(
    "{key}: no group named {name:?} on this system: add it (groupadd {name}), or leave {key} empty"
)]
pub struct NoSuchGroup {
    /// The configuration key that named it.
    pub key: &'static str,
    /// The name.
    pub name: String,
}

impl Policy {
    /// The policy for this process: `control_group` (empty: this
    /// process's own group) and `read_group` (empty: none), looked up by
    /// name in the system's group database.
    pub fn from_names(control_group: &str, read_group: &str) -> Result<Policy, NoSuchGroup> {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let control = if control_group.is_empty() {
            Group {
                gid,
                name: group_name(gid).unwrap_or_else(|| format!("gid {gid}")),
            }
        } else {
            lookup("health.control_group", control_group)?
        };
        let read = if read_group.is_empty() {
            None
        } else {
            Some(lookup("health.read_group", read_group)?)
        };
        Ok(Policy {
            owner_uid: uid,
            control,
            read,
        })
    }

    /// Whether `peer` may make a request that needs `need` (`what` names
    /// it in the refusal). The refusal says which group to join.
    pub fn check(&self, peer: &Peer, need: Need, what: &str) -> Result<(), String> {
        if peer.uid == 0 || peer.uid == self.owner_uid || peer.in_group(self.control.gid) {
            return Ok(());
        }
        let read_ok = self.read.as_ref().is_some_and(|g| peer.in_group(g.gid));
        if need == Need::Read && read_ok {
            return Ok(());
        }
        let user = user_name(peer.uid).unwrap_or_else(|| format!("uid {}", peer.uid));
        let groups = match (need, &self.read) {
            (Need::Read, Some(r)) => format!("group `{}` or `{}`", r.name, self.control.name),
            _ => format!("group `{}`", self.control.name),
        };
        let join = match (need, &self.read) {
            (Need::Read, Some(r)) => r.name.as_str(),
            _ => self.control.name.as_str(),
        };
        Err(format!(
            "{what} refused: {user} (uid {}) is not in {groups}: join it (usermod -aG {join} {user}, \
             then log in again) or ask as root",
            peer.uid
        ))
    }
}

/// The group named `name`, for configuration key `key`.
fn lookup(key: &'static str, name: &str) -> Result<Group, NoSuchGroup> {
    let missing = || NoSuchGroup {
        key,
        name: name.to_owned(),
    };
    let c = std::ffi::CString::new(name).map_err(|_| missing())?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero group is a valid value for getgrnam_r to fill.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: `c` is a valid C string; `gr` and `buf` are writable and
    // outlive the call; `buf.len()` is its size; `out` is set to `&gr` or
    // null.
    let rc =
        unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() {
        return Err(missing());
    }
    Ok(Group {
        gid: gr.gr_gid,
        name: name.to_owned(),
    })
}

/// The group database's name for `gid`, if it has one.
fn group_name(gid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: as in `lookup`.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as in `lookup`, by gid.
    let rc = unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || gr.gr_name.is_null() {
        return None;
    }
    // SAFETY: getgrgid_r set gr_name to a NUL-terminated string in `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(gr.gr_name) };
    Some(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            owner_uid: 990,
            control: Group {
                gid: 991,
                name: "edgerec".into(),
            },
            read: Some(Group {
                gid: 992,
                name: "edgerec-read".into(),
            }),
        }
    }

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> Peer {
        Peer {
            pid: 4242,
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn root_the_owner_and_the_control_group_may_do_everything() {
        let p = policy();
        for who in [
            peer(0, 0, &[]),
            peer(990, 990, &[]),
            peer(1000, 1000, &[991]),
            peer(1000, 991, &[]),
        ] {
            assert!(p.check(&who, Need::Control, "pause").is_ok(), "{who:?}");
            assert!(p.check(&who, Need::Read, "is-paused").is_ok(), "{who:?}");
        }
    }

    #[test]
    fn the_read_group_may_read_and_is_told_which_group_controls() {
        let p = policy();
        let reader = peer(1000, 1000, &[992, 27]);
        assert!(p.check(&reader, Need::Read, "is-paused").is_ok());
        let e = p.check(&reader, Need::Control, "pause").unwrap_err();
        assert!(e.starts_with("pause refused: "), "{e}");
        assert!(
            e.contains("(uid 1000) is not in group `edgerec`: join it (usermod -aG edgerec "),
            "{e}"
        );
    }

    #[test]
    fn anyone_else_is_refused_with_the_group_to_join() {
        let p = policy();
        let other = peer(65534, 65534, &[100]);
        let e = p.check(&other, Need::Read, "is-paused").unwrap_err();
        assert!(
            e.contains("is not in group `edgerec-read` or `edgerec`"),
            "{e}"
        );
        assert!(e.contains("usermod -aG edgerec-read "), "{e}");
        let e = p.check(&other, Need::Control, "split").unwrap_err();
        assert!(e.starts_with("split refused: "), "{e}");
        assert!(e.contains("usermod -aG edgerec "), "{e}");
        // Without a read group, reading takes the control group.
        let p = Policy {
            read: None,
            ..policy()
        };
        let e = p.check(&other, Need::Read, "is-paused").unwrap_err();
        assert!(e.contains("is not in group `edgerec`:"), "{e}");
    }

    #[test]
    fn groups_are_looked_up_by_name_and_a_missing_one_names_its_key() {
        // Every system has root's group 0.
        let root = group_name(0).expect("gid 0 has a name");
        let p = Policy::from_names(&root, "").expect("root's group");
        assert_eq!(p.control.gid, 0);
        assert!(p.read.is_none());
        let e = Policy::from_names("", "no-such-group-edgerec").unwrap_err();
        assert_eq!(e.key, "health.read_group");
        assert!(
            e.to_string().contains("groupadd no-such-group-edgerec"),
            "{e}"
        );
    }
}
