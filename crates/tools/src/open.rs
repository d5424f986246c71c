//! What a path names: a ROS 1 bag (`.bag`, `.bag.active`, recognised by
//! its `#ROSBAG V2.0` line, not its name), an MCAP file, or a rosbag2 bag
//! directory (every segment in order).

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use edgerec_format::info::{self, BagInfo};
use edgerec_format::records::MAGIC;
use edgerec_rosbag1::Bag;

use crate::error::{Result, ToolError};

/// The first line of every ROS 1 bag v2.0.
pub const ROS1_MAGIC: &[u8] = b"#ROSBAG V2.0\n";

/// What kind of bag a path names, from its first bytes (files) or as a
/// directory; nothing past the first 13 bytes is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A ROS 1 bag file.
    Ros1,
    /// An MCAP file (or a file named `.mcap`, so its error names the byte)
    /// or a rosbag2 bag directory.
    Mcap,
}

/// The kind of `path`, or why it is neither.
pub fn kind(path: &Path) -> Result<Kind> {
    let meta = std::fs::metadata(path).map_err(ToolError::io(path))?;
    if meta.is_dir() {
        return Ok(Kind::Mcap);
    }
    let mut head = [0u8; 13];
    let mut f = File::open(path).map_err(ToolError::io(path))?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]).map_err(ToolError::io(path))? {
            0 => break,
            k => n += k,
        }
    }
    let head = &head[..n];
    if head == ROS1_MAGIC {
        return Ok(Kind::Ros1);
    }
    // A file named .mcap goes to the MCAP reader even when damaged, so its
    // error names the byte.
    if head.starts_with(MAGIC) || is_mcap_name(path) {
        return Ok(Kind::Mcap);
    }
    Err(ToolError::NotABag {
        path: path.to_path_buf(),
        what: format!(
            "neither a ROS 1 bag v2.0 (`#ROSBAG V2.0`) nor an MCAP file: it starts with {:?}",
            String::from_utf8_lossy(head)
        ),
    })
}

/// A ROS 1 bag, opened (through its index, or by a scan when it has none)
/// on first use and kept open, so the commands that ask it several things
/// (its topics, its first time, its messages) read its index, or scan an
/// unindexed bag, once.
#[derive(Debug)]
pub struct Ros1Input {
    path: PathBuf,
    bag: RefCell<Option<Bag<BufReader<File>>>>,
}

impl Ros1Input {
    /// The bag's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the open bag, opening it first if needed.
    pub fn with<T>(&self, f: impl FnOnce(&mut Bag<BufReader<File>>) -> Result<T>) -> Result<T> {
        let mut slot = self.bag.borrow_mut();
        let bag = match slot.take() {
            Some(bag) => bag,
            None => Bag::open(&self.path).map_err(ToolError::ros1(&self.path))?,
        };
        f(slot.insert(bag))
    }
}

/// An input the tools read.
#[derive(Debug)]
pub enum Input {
    /// A ROS 1 bag file.
    Ros1(Box<Ros1Input>),
    /// An MCAP file or a rosbag2 directory, with its files' summaries.
    Mcap(Box<BagInfo>),
}

impl Input {
    /// The path as given.
    pub fn path(&self) -> &Path {
        match self {
            Input::Ros1(b) => b.path(),
            Input::Mcap(i) => &i.path,
        }
    }
}

/// The input `path` names: a ROS 1 bag (opened when first asked), or an
/// MCAP file or bag directory with its files' summaries read.
pub fn open(path: &Path) -> Result<Input> {
    match kind(path)? {
        Kind::Ros1 => Ok(Input::Ros1(Box::new(Ros1Input {
            path: path.to_path_buf(),
            bag: RefCell::new(None),
        }))),
        Kind::Mcap => {
            let info = info::inspect(path).map_err(ToolError::mcap(path))?;
            if path.is_dir() && info.files.is_empty() {
                return Err(ToolError::NotABag {
                    path: path.to_path_buf(),
                    what: "a directory with no .mcap file: give a rosbag2 bag directory, an .mcap file or a ROS 1 .bag".to_owned(),
                });
            }
            Ok(Input::Mcap(Box::new(info)))
        }
    }
}

fn is_mcap_name(p: &Path) -> bool {
    let n = p.to_string_lossy();
    n.ends_with(".mcap") || n.ends_with(".mcap.active")
}
