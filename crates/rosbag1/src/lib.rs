//! ROS 1 bag v2.0: reading through the index or by a sequential scan,
//! summaries like `rosbag info`, an indexed writer, and [`reindex`] for
//! the unindexed `.bag.active` a power cut leaves.
//!
//! The layers follow the file: [`records`] frames records (every length
//! checked against the bytes that remain before anything is allocated),
//! [`header`], [`connection`], [`chunk`], [`index`] and [`message`] parse
//! one record kind each, [`bag`] opens a bag (index or scan), [`messages`]
//! streams its messages one decompressed chunk at a time, [`summary`]
//! counts, [`writer`] writes and [`reindex`](mod@reindex) repairs. Decompression
//! (bz2, lz4) is pure Rust, so the crate builds for any target. Encrypted
//! bags are refused with [`Error::Encrypted`].
//!
//! ```
//! use edgerec_rosbag1::{Bag, BagWriter, Connection, Filter, Time};
//! use std::io::Cursor;
//!
//! let mut w = BagWriter::new(Cursor::new(Vec::new())).unwrap();
//! w.add_connection(Connection::new(0, "/chatter", "std_msgs/String",
//!     "992ce8a1687cec8c8bd883ec73ca41d1", "string data\n")).unwrap();
//! w.write(0, Time { sec: 1, nsec: 0 }, b"\x02\0\0\0hi").unwrap();
//! let (out, _) = w.finish().unwrap();
//!
//! let mut bag = Bag::from_reader(Cursor::new(out.into_inner())).unwrap();
//! let msgs: Vec<_> = bag.messages(&Filter::default()).collect::<Result<_, _>>().unwrap();
//! assert_eq!(msgs[0].topic(), "/chatter");
//! assert_eq!(msgs[0].time_ns(), 1_000_000_000);
//! assert_eq!(bag.summary().unwrap().messages, 1);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod bag;
pub mod chunk;
pub mod connection;
pub mod error;
pub mod header;
pub mod index;
pub mod message;
pub mod messages;
pub mod records;
pub mod reindex;
pub mod summary;
pub mod time;
pub mod writer;

pub use bag::{Bag, ChunkRef, CutChunk, Indexing, ScanCause, ScanReport};
pub use chunk::Compression;
pub use connection::Connection;
pub use error::{Error, Place, Result};
pub use messages::{Filter, Message, Messages};
pub use reindex::{reindex, ReindexReport};
pub use summary::{Summary, TopicSummary};
pub use time::Time;
pub use writer::{BagWriter, WriteSummary};
