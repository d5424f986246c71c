//! Opening a bag: through its index, or by a sequential scan of its
//! records when there is no index (a `.bag.active` left by a power cut has
//! `index_pos` 0) or the index cannot be read.
//!
//! The scan walks the records after the bag header chunk by chunk, keeps
//! the connections and per-chunk counts it finds, and stops at the first
//! record that is cut short or broken. A chunk cut by the end of the file
//! still gives its whole messages: all of them for an uncompressed chunk,
//! for a compressed one what the streaming decoder yields whole. Only
//! counts and time ranges are kept, never messages, so memory stays small.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::Path;
use std::sync::Arc;

use crate::chunk::{self, ChunkHeader, Compression};
use crate::connection::{self, Connection};
use crate::error::{Error, Place, Result};
use crate::header::BagHeader;
use crate::index::ChunkInfo;
use crate::message::{ChunkItem, ChunkWalk};
use crate::records::{op, RecordReader, MAGIC};
use crate::Time;

/// One connection's messages in one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnCount {
    /// The connection id.
    pub conn: u32,
    /// Its messages in the chunk.
    pub count: u32,
    /// Its earliest message (from the index: the chunk's start time).
    pub first: Time,
    /// Its latest message (from the index: the chunk's end time).
    pub last: Time,
}

/// A chunk of the bag as the index or the scan found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRef {
    /// File offset of the chunk record.
    pub pos: u64,
    /// Earliest message time.
    pub start_time: Time,
    /// Latest message time.
    pub end_time: Time,
    /// Messages per connection.
    pub counts: Vec<ConnCount>,
    /// The chunk is cut or damaged: readers take the whole messages at its
    /// start and stop quietly at the first broken record.
    pub cut: bool,
}

impl ChunkRef {
    /// Messages in the chunk.
    pub fn message_count(&self) -> u64 {
        self.counts.iter().map(|c| u64::from(c.count)).sum()
    }
}

/// Why a bag was scanned instead of read through its index.
#[derive(Debug)]
pub enum ScanCause {
    /// [`Bag::scan`] was called.
    Requested,
    /// The bag header's `index_pos` is 0 (a bag still being recorded).
    NoIndex,
    /// The index could not be read.
    IndexUnreadable(Error),
}

/// A chunk the file ends inside (or whose data is damaged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutChunk {
    /// File offset of the chunk record.
    pub pos: u64,
    /// Its compression.
    pub compression: Compression,
    /// Data bytes the record announces.
    pub data_len: u64,
    /// Data bytes there are.
    pub available: u64,
    /// Whole messages recovered from it.
    pub messages: u64,
}

/// What a sequential scan found.
#[derive(Debug)]
pub struct ScanReport {
    /// Why the bag was scanned.
    pub cause: ScanCause,
    /// Whole chunks read.
    pub chunks: u64,
    /// Messages found with a known connection (cut chunk included).
    pub messages: u64,
    /// Messages whose connection record was never found; readers skip them.
    pub orphan_messages: u64,
    /// The chunk the scan stopped inside, if it kept messages from it.
    pub cut_chunk: Option<CutChunk>,
    /// File offset where the scan stopped (the file length after a clean end).
    pub stop_offset: u64,
    /// Why it stopped there; `None` at a clean end of the file.
    pub stop_error: Option<Error>,
}

/// How the bag's chunks and connections were found.
#[derive(Debug)]
pub enum Indexing {
    /// From the index at `index_pos`.
    Index,
    /// By a sequential scan.
    Scan(ScanReport),
}

/// An open bag: its connections and chunks, and the reader messages are
/// read through (see [`Bag::messages`]).
#[derive(Debug)]
pub struct Bag<R> {
    pub(crate) reader: RecordReader<R>,
    header: BagHeader,
    pub(crate) connections: BTreeMap<u32, Arc<Connection>>,
    pub(crate) chunks: Vec<ChunkRef>,
    indexing: Indexing,
}

impl Bag<BufReader<File>> {
    /// Opens a bag file through its index; scans it when it has none or
    /// the index is unreadable ([`Bag::indexing`] says which happened).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Bag::from_reader(BufReader::new(File::open(path)?))
    }

    /// Opens a bag file by scanning its records, ignoring any index.
    pub fn scan(path: impl AsRef<Path>) -> Result<Self> {
        Bag::scan_reader(BufReader::new(File::open(path)?))
    }

    /// [`Bag::scan`], handing the report to the caller: the bag keeps an
    /// empty one (same cause, no counts), for callers that own the report.
    pub(crate) fn scan_for_report(path: &Path) -> Result<(Self, ScanReport)> {
        let mut bag = Bag::scan(path)?;
        let empty = Indexing::Scan(ScanReport {
            cause: ScanCause::Requested,
            chunks: 0,
            messages: 0,
            orphan_messages: 0,
            cut_chunk: None,
            stop_offset: 0,
            stop_error: None,
        });
        match std::mem::replace(&mut bag.indexing, empty) {
            Indexing::Scan(report) => Ok((bag, report)),
            Indexing::Index => Err(Error::BadData {
                at: Place::File(0),
                what: "a scan produced no scan report",
            }),
        }
    }
}

impl<R: Read + Seek> Bag<R> {
    /// [`Bag::open`] over any reader.
    pub fn from_reader(inner: R) -> Result<Self> {
        let mut reader = RecordReader::new(inner)?;
        let (header, data_start) = BagHeader::read(&mut reader)?;
        let cause = if header.index_pos == 0 {
            ScanCause::NoIndex
        } else {
            match read_index(&mut reader, &header, data_start) {
                Ok((connections, chunks)) => {
                    return Ok(Bag {
                        reader,
                        header,
                        connections,
                        chunks,
                        indexing: Indexing::Index,
                    })
                }
                Err(e) => ScanCause::IndexUnreadable(e),
            }
        };
        Ok(scan(reader, header, data_start, cause))
    }

    /// [`Bag::scan`] over any reader.
    pub fn scan_reader(inner: R) -> Result<Self> {
        let mut reader = RecordReader::new(inner)?;
        let (header, data_start) = BagHeader::read(&mut reader)?;
        Ok(scan(reader, header, data_start, ScanCause::Requested))
    }
}

impl<R> Bag<R> {
    /// The bag header as stored.
    pub fn header(&self) -> &BagHeader {
        &self.header
    }

    /// How chunks and connections were found, with the scan's report.
    pub fn indexing(&self) -> &Indexing {
        &self.indexing
    }

    /// The scan's report, when the bag was scanned.
    pub fn scan_report(&self) -> Option<&ScanReport> {
        match &self.indexing {
            Indexing::Scan(r) => Some(r),
            Indexing::Index => None,
        }
    }

    /// The connections by id.
    pub fn connections(&self) -> &BTreeMap<u32, Arc<Connection>> {
        &self.connections
    }

    /// The chunks in file order.
    pub fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }

    /// The file's length.
    pub fn file_len(&self) -> u64 {
        self.reader.len()
    }

    /// Messages with a known connection.
    pub fn message_count(&self) -> u64 {
        self.chunks
            .iter()
            .flat_map(|c| &c.counts)
            .filter(|c| self.connections.contains_key(&c.conn))
            .map(|c| u64::from(c.count))
            .sum()
    }

    /// Whether chunk order is time order: no chunk starts before an earlier
    /// chunk ends. [`Bag::messages`] yields time order exactly when this holds.
    pub fn chunks_in_time_order(&self) -> bool {
        let mut latest = Time::MIN;
        for c in self.chunks.iter().filter(|c| !c.counts.is_empty()) {
            if c.start_time < latest {
                return false;
            }
            latest = latest.max(c.end_time);
        }
        true
    }
}

type Index = (BTreeMap<u32, Arc<Connection>>, Vec<ChunkRef>);

/// Reads the connections and chunk infos at `index_pos`.
fn read_index<R: Read + Seek>(
    r: &mut RecordReader<R>,
    header: &BagHeader,
    data_start: u64,
) -> Result<Index> {
    let mut pos = header.index_pos;
    if pos < data_start || pos >= r.len() {
        return Err(Error::BadData {
            at: Place::File(MAGIC.len() as u64),
            what: "index_pos lies outside the file's records",
        });
    }
    let mut connections = BTreeMap::new();
    for _ in 0..header.conn_count {
        let head = r.read_head(pos)?;
        let data = r.read_data(&head)?;
        let c = connection::expect(&head.fields()?, &data, Place::File(pos))?;
        connections.insert(c.id, Arc::new(c));
        pos = head.end();
    }
    let mut chunks = Vec::new();
    for _ in 0..header.chunk_count {
        let head = r.read_head(pos)?;
        let fields = head.fields()?;
        let found = fields.op()?;
        if found != op::CHUNK_INFO {
            return Err(Error::UnexpectedOp {
                at: Place::File(pos),
                expected: "chunk info",
                expected_op: op::CHUNK_INFO,
                found,
            });
        }
        let info = ChunkInfo::parse(&fields, &r.read_data(&head)?)?;
        if info.chunk_pos < data_start || info.chunk_pos >= header.index_pos {
            return Err(Error::BadData {
                at: Place::File(pos),
                what: "a chunk info's chunk_pos lies outside the chunks",
            });
        }
        chunks.push(ChunkRef {
            pos: info.chunk_pos,
            start_time: info.start_time,
            end_time: info.end_time,
            counts: info
                .counts
                .iter()
                .map(|&(conn, count)| ConnCount {
                    conn,
                    count,
                    first: info.start_time,
                    last: info.end_time,
                })
                .collect(),
            cut: false,
        });
        pos = head.end();
    }
    Ok((connections, chunks))
}

/// What one chunk gave the scan.
struct ScannedChunk {
    chunk: ChunkRef,
    /// Set when the chunk is cut or damaged: where and why the scan stops.
    damage: Option<(u64, Error)>,
    compression: Compression,
    data_len: u64,
    available: u64,
}

fn scan_chunk<R: Read + Seek>(
    r: &mut RecordReader<R>,
    head: &crate::records::RecordHead,
    connections: &mut BTreeMap<u32, Arc<Connection>>,
) -> Result<ScannedChunk> {
    let pos = head.pos;
    let ch = ChunkHeader::parse(&head.fields()?, pos)?;
    let complete = head.end() <= r.len();
    let data = r.read_data_available(head)?;
    let available = data.len() as u64;
    let (plain, decode_error) = chunk::decompress_lenient(ch, data, pos);
    let mut damage = if complete {
        decode_error.map(|e| (pos, e))
    } else {
        Some((
            pos,
            Error::Truncated {
                at: Place::File(pos),
                what: "chunk data",
                need: head.end() - pos,
                have: r.len() - pos,
            },
        ))
    };
    let mut counts: BTreeMap<u32, ConnCount> = BTreeMap::new();
    let mut walk = ChunkWalk::new(&plain, pos);
    for item in walk.by_ref() {
        match item {
            Ok(ChunkItem::Connection(c)) => {
                connections.entry(c.id).or_insert_with(|| Arc::new(c));
            }
            Ok(ChunkItem::Message { conn, time, .. }) => {
                let e = counts.entry(conn).or_insert(ConnCount {
                    conn,
                    count: 0,
                    first: time,
                    last: time,
                });
                e.count += 1;
                e.first = e.first.min(time);
                e.last = e.last.max(time);
            }
            Err(e) => {
                damage.get_or_insert((pos, e));
                break;
            }
        }
    }
    let start_time = counts.values().map(|c| c.first).min().unwrap_or(Time::MIN);
    let end_time = counts.values().map(|c| c.last).max().unwrap_or(Time::MIN);
    Ok(ScannedChunk {
        chunk: ChunkRef {
            pos,
            start_time,
            end_time,
            counts: counts.into_values().collect(),
            cut: damage.is_some(),
        },
        damage,
        compression: ch.compression,
        data_len: head.data_len,
        available,
    })
}

/// Walks the records after the bag header; never fails: it stops at the
/// first broken record and reports it.
fn scan<R: Read + Seek>(
    mut r: RecordReader<R>,
    header: BagHeader,
    data_start: u64,
    cause: ScanCause,
) -> Bag<R> {
    let mut connections = BTreeMap::new();
    let mut chunks = Vec::new();
    let mut whole_chunks = 0u64;
    let mut cut_chunk = None;
    let mut pos = data_start;
    let stop_error = loop {
        if pos > r.len() {
            // Cut inside the bag header's padding: its fields are whole,
            // no record follows.
            break Some(Error::Truncated {
                at: Place::File(MAGIC.len() as u64),
                what: "bag header record",
                need: pos - MAGIC.len() as u64,
                have: r.len() - MAGIC.len() as u64,
            });
        }
        if pos == r.len() {
            break None;
        }
        let step = (|| -> Result<Option<u64>> {
            let head = r.read_head(pos)?;
            let fields = head.fields()?;
            match fields.op()? {
                op::CHUNK => {
                    let s = scan_chunk(&mut r, &head, &mut connections)?;
                    let kept = s.chunk.message_count();
                    match s.damage {
                        None => {
                            whole_chunks += 1;
                            chunks.push(s.chunk);
                            Ok(Some(head.end()))
                        }
                        Some((at, e)) => {
                            if kept > 0 {
                                cut_chunk = Some(CutChunk {
                                    pos: s.chunk.pos,
                                    compression: s.compression,
                                    data_len: s.data_len,
                                    available: s.available,
                                    messages: kept,
                                });
                                chunks.push(s.chunk);
                            }
                            pos = at;
                            Err(e)
                        }
                    }
                }
                op::CONNECTION => {
                    let data = r.read_data(&head)?;
                    let c = Connection::parse(&fields, &data)?;
                    connections.entry(c.id).or_insert_with(|| Arc::new(c));
                    Ok(Some(head.end()))
                }
                // Index data, chunk infos and ops this reader does not know:
                // framed, so skipped whole; a cut one ends the scan.
                _ => {
                    if head.end() > r.len() {
                        return Err(Error::Truncated {
                            at: Place::File(pos),
                            what: "record data",
                            need: head.end() - pos,
                            have: r.len() - pos,
                        });
                    }
                    Ok(Some(head.end()))
                }
            }
        })();
        match step {
            Ok(Some(next)) => pos = next,
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    let known = |c: &&ConnCount| connections.contains_key(&c.conn);
    let all: u64 = chunks.iter().map(ChunkRef::message_count).sum();
    let messages: u64 = chunks
        .iter()
        .flat_map(|c| &c.counts)
        .filter(known)
        .map(|c| u64::from(c.count))
        .sum();
    let report = ScanReport {
        cause,
        chunks: whole_chunks,
        messages,
        orphan_messages: all - messages,
        cut_chunk,
        stop_offset: if stop_error.is_some() {
            pos.min(r.len())
        } else {
            r.len()
        },
        stop_error,
    };
    Bag {
        reader: r,
        header,
        connections,
        chunks,
        indexing: Indexing::Scan(report),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BagWriter, Filter};
    use std::io::Cursor;

    /// A bag of `n` messages in one uncompressed chunk, cut `cut_back`
    /// bytes before the chunk's end, with `index_pos` 0 as in a `.bag.active`.
    fn cut_bag(n: u32, cut_back: usize) -> (Vec<u8>, u64) {
        let mut w = BagWriter::new(Cursor::new(Vec::new())).unwrap();
        w.add_connection(Connection::new(
            1,
            "/a",
            "std_msgs/String",
            "x",
            "string data\n",
        ))
        .unwrap();
        for i in 0..n {
            w.write(1, Time { sec: i, nsec: 0 }, &[i as u8; 100])
                .unwrap();
        }
        let (out, summary) = w.finish().unwrap();
        let mut bytes = out.into_inner();
        let mut r = RecordReader::new(Cursor::new(bytes.clone())).unwrap();
        let (_, first) = BagHeader::read(&mut r).unwrap();
        let chunk_end = r.read_head(first).unwrap().end() as usize;
        bytes.truncate(chunk_end - cut_back);
        bytes.splice(
            ..BagHeader::default().encode().len(),
            BagHeader::default().encode(),
        );
        assert!(summary.index_pos > chunk_end as u64);
        (bytes, first)
    }

    #[test]
    fn a_cut_uncompressed_chunk_gives_its_whole_messages() {
        // Each message record is 100 bytes of data plus about 40 of framing:
        // cutting 50 bytes leaves 9 whole messages of 10.
        let (bytes, chunk_pos) = cut_bag(10, 50);
        let mut bag = Bag::from_reader(Cursor::new(bytes)).unwrap();
        let report = bag.scan_report().unwrap();
        assert!(matches!(report.cause, ScanCause::NoIndex));
        assert_eq!(report.chunks, 0);
        assert_eq!(report.messages, 9);
        assert_eq!(report.stop_offset, chunk_pos);
        assert!(matches!(report.stop_error, Some(Error::Truncated { .. })));
        let cut = report.cut_chunk.clone().unwrap();
        assert_eq!(
            (cut.pos, cut.messages, cut.compression),
            (chunk_pos, 9, Compression::None)
        );
        let msgs: Vec<_> = bag
            .messages(&Filter::default())
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(msgs.len(), 9);
        assert_eq!(msgs[8].time, Time { sec: 8, nsec: 0 });
        assert_eq!(msgs[8].data, [8u8; 100]);
    }

    #[test]
    fn a_bag_cut_inside_its_bag_header_is_an_error_not_a_panic() {
        let (bytes, _) = cut_bag(3, 0);
        for cut in [0, 5, 13, 20] {
            assert!(Bag::from_reader(Cursor::new(bytes[..cut].to_vec())).is_err());
        }
        // Inside the padding the header's fields are whole: an empty bag
        // whose scan says where it was cut.
        let bag = Bag::from_reader(Cursor::new(bytes[..4000].to_vec())).unwrap();
        let report = bag.scan_report().unwrap();
        assert_eq!(report.messages, 0);
        assert_eq!(report.stop_offset, 4000);
        assert!(matches!(report.stop_error, Some(Error::Truncated { .. })));
    }
}
