//! What a path names: a ROS 1 bag (`.bag`, `.bag.active`, recognised by
//! its `#ROSBAG V2.0` line, not its name), an MCAP file, or a rosbag2 bag
//! directory (every segment in order).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use edgerec_format::info::{self, BagInfo};
use edgerec_format::records::MAGIC;

use crate::error::{Result, ToolError};

/// The first line of every ROS 1 bag v2.0.
pub const ROS1_MAGIC: &[u8] = b"#ROSBAG V2.0\n";

/// An input the tools read.
#[derive(Debug)]
pub enum Input {
    /// A ROS 1 bag file.
    Ros1(PathBuf),
    /// An MCAP file or a rosbag2 directory, with its files' summaries.
    Mcap(Box<BagInfo>),
}

impl Input {
    /// The path as given.
    pub fn path(&self) -> &Path {
        match self {
            Input::Ros1(p) => p,
            Input::Mcap(i) => &i.path,
        }
    }
}

/// The kind of `path`, from its first bytes (files) or as a bag directory.
pub fn open(path: &Path) -> Result<Input> {
    let meta = std::fs::metadata(path).map_err(ToolError::io(path))?;
    if meta.is_dir() {
        let info = info::inspect(path).map_err(ToolError::mcap(path))?;
        if info.files.is_empty() {
            return Err(ToolError::NotABag {
                path: path.to_path_buf(),
                what: "a directory with no .mcap file: give a rosbag2 bag directory, an .mcap file or a ROS 1 .bag".to_owned(),
            });
        }
        return Ok(Input::Mcap(Box::new(info)));
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
        return Ok(Input::Ros1(path.to_path_buf()));
    }
    // A file named .mcap goes to the MCAP reader even when damaged, so its
    // error names the byte.
    if head.starts_with(MAGIC) || is_mcap_name(path) {
        let info = info::inspect(path).map_err(ToolError::mcap(path))?;
        return Ok(Input::Mcap(Box::new(info)));
    }
    Err(ToolError::NotABag {
        path: path.to_path_buf(),
        what: format!(
            "neither a ROS 1 bag v2.0 (`#ROSBAG V2.0`) nor an MCAP file: it starts with {:?}",
            String::from_utf8_lossy(head)
        ),
    })
}

fn is_mcap_name(p: &Path) -> bool {
    let n = p.to_string_lossy();
    n.ends_with(".mcap") || n.ends_with(".mcap.active")
}
