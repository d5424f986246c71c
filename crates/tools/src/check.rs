//! `check` of a ROS 1 bag: the structure record by record, and the index
//! against the data it indexes. ROS 1 bags carry no CRCs, so what can be
//! verified is that every record frames and parses, every chunk
//! decompresses to exactly its `size`, every message names a connection,
//! the chunk infos' counts and time ranges and the index data records'
//! times match the messages in each chunk, and a sequential scan finds the
//! same chunks the index lists. The first problem is named with its byte
//! offset; an unindexed bag is a problem whose fix is `edgerec reindex`.

use std::collections::BTreeMap;
use std::path::Path;

use edgerec_rosbag1::{Bag, Indexing, Time};

use crate::error::{Result, ToolError};

/// What a valid ROS 1 bag holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ros1Check {
    /// Messages, every one parsed.
    pub messages: u64,
    /// Chunks, every one decompressed.
    pub chunks: u64,
    /// Connection records.
    pub connections: usize,
}

/// Verifies the ROS 1 bag at `path`; `Err` names its first problem.
pub fn check_ros1(path: &Path) -> Result<Ros1Check> {
    let problem = |what: String| ToolError::NotABag {
        path: path.to_path_buf(),
        what,
    };
    let mut bag = Bag::open(path).map_err(ToolError::ros1(path))?;
    if let Indexing::Scan(rep) = bag.indexing() {
        let mut what = format!(
            "not indexed ({}): {} whole messages in {} chunks found by a scan",
            crate::info::cause_text(&rep.cause),
            rep.messages,
            rep.chunks
        );
        if let Some(cut) = &rep.cut_chunk {
            what.push_str(&format!(
                ", the file ends inside the chunk at byte {} ({} of its {} data bytes)",
                cut.pos, cut.available, cut.data_len
            ));
        }
        if let Some(e) = &rep.stop_error {
            what.push_str(&format!(", the scan stopped: {e}"));
        }
        what.push_str(&format!(
            "; `edgerec reindex {}` writes an indexed copy beside it",
            path.display()
        ));
        return Err(problem(what));
    }
    let chunks = bag.chunks().to_vec();
    let mut messages = 0u64;
    for chunk in &chunks {
        let found = bag
            .chunk_message_times(chunk)
            .map_err(ToolError::ros1(path))?;
        let mut per_conn: BTreeMap<u32, Vec<Time>> = BTreeMap::new();
        for (conn, t) in &found {
            if !bag.connections().contains_key(conn) {
                return Err(problem(format!(
                    "the chunk at byte {} holds a message of connection {conn}, which has no connection record",
                    chunk.pos
                )));
            }
            if *t < chunk.start_time || *t > chunk.end_time {
                return Err(problem(format!(
                    "the chunk at byte {} holds a message at {t} outside the time range its chunk info gives ({} .. {})",
                    chunk.pos, chunk.start_time, chunk.end_time
                )));
            }
            per_conn.entry(*conn).or_default().push(*t);
        }
        let counted: BTreeMap<u32, u32> = chunk.counts.iter().map(|c| (c.conn, c.count)).collect();
        let have: BTreeMap<u32, u32> = per_conn.iter().map(|(c, t)| (*c, t.len() as u32)).collect();
        if counted != have {
            return Err(problem(format!(
                "the chunk info of the chunk at byte {} counts {counted:?} messages per connection, the chunk holds {have:?}",
                chunk.pos
            )));
        }
        let index = bag
            .chunk_index_times(chunk)
            .map_err(ToolError::ros1(path))?
            .ok_or_else(|| {
                problem(format!(
                    "the index data records after the chunk at byte {} are missing or do not count its messages",
                    chunk.pos
                ))
            })?;
        for (conn, mut times) in index {
            times.sort_unstable();
            let mut actual = per_conn.get(&conn).cloned().unwrap_or_default();
            actual.sort_unstable();
            if times != actual {
                return Err(problem(format!(
                    "the index data of connection {conn} after the chunk at byte {} gives other times than its messages have",
                    chunk.pos
                )));
            }
        }
        messages += found.len() as u64;
    }
    // The index must list every chunk there is: a scan finds them all.
    let scan = Bag::scan(path).map_err(ToolError::ros1(path))?;
    let indexed: Vec<u64> = chunks.iter().map(|c| c.pos).collect();
    let scanned: Vec<u64> = scan.chunks().iter().map(|c| c.pos).collect();
    if indexed != scanned {
        let first = indexed
            .iter()
            .zip(&scanned)
            .position(|(a, b)| a != b)
            .unwrap_or(indexed.len().min(scanned.len()));
        return Err(problem(format!(
            "the index lists {} chunks, the file holds {}; they differ from chunk {} on (index: byte {:?}, file: byte {:?})",
            indexed.len(),
            scanned.len(),
            first,
            indexed.get(first),
            scanned.get(first)
        )));
    }
    if let Indexing::Scan(rep) = scan.indexing() {
        if let Some(e) = &rep.stop_error {
            return Err(problem(format!(
                "past the last chunk, at byte {}: {e}",
                rep.stop_offset
            )));
        }
    }
    Ok(Ros1Check {
        messages,
        chunks: chunks.len() as u64,
        connections: bag.connections().len(),
    })
}
