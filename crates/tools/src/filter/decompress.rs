//! Chunks decompressed on every core and handed on in file order.
//!
//! `filter` reads the chunks it needs front to back; decompressing them
//! is most of its work on a compressed input. Here the calling thread
//! reads chunk records from the file and gives each to a pool of worker
//! threads, which parse and decompress it; the results come back to the
//! calling thread in the order the chunks were read, so messages reach the
//! output in file order whatever thread finished first. At most twice as
//! many chunks as there are workers are in memory at once, so memory stays
//! bounded by the chunk size, not the input's size.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Mutex;

use edgerec_format::reader::decompress_chunk;
use edgerec_format::records;

/// The decompressed records of a chunk, or what is wrong with it.
pub(crate) type Records = std::result::Result<Vec<u8>, String>;

/// A chunk record read from the file: its offset, its bytes, and where
/// the Chunk record's body starts in them.
pub(crate) struct RawChunk {
    /// The file offset of the record.
    pub at: u64,
    /// The record (or its body).
    pub bytes: Vec<u8>,
    /// Where the body starts in `bytes`.
    pub body_from: usize,
}

/// The worker threads to use: the cores this process may run on, at most
/// 8 (past that the single thread writing the output is the limit).
pub(crate) fn workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().min(8))
        .unwrap_or(1)
}

/// Parses and decompresses one chunk record.
pub(crate) fn decompress(c: &RawChunk) -> Records {
    let body = c
        .bytes
        .get(c.body_from..)
        .ok_or_else(|| "a chunk record shorter than its prefix".to_owned())?;
    decompress_body(c.at, body)
}

/// Parses and decompresses the body of the Chunk record at `at`.
pub(crate) fn decompress_body(at: u64, body: &[u8]) -> Records {
    let parsed = records::parse_chunk(body).map_err(|e| format!("chunk does not parse: {e}"))?;
    decompress_chunk(&parsed, at).map_err(|e| e.to_string())
}

type Job = (RawChunk, SyncSender<Records>);

/// Calls `each` with the offset and decompressed records of every chunk
/// `next` reads, in the order `next` read them, decompressing up to
/// `workers` chunks at once. `next` returns `None` when there is no more
/// to read; `each` returns `false` to stop (damage found). An error of
/// either ends the reading and is returned.
pub(crate) fn in_order<E>(
    workers: usize,
    mut next: impl FnMut() -> std::result::Result<Option<RawChunk>, E>,
    mut each: impl FnMut(u64, Records) -> std::result::Result<bool, E>,
) -> std::result::Result<(), E> {
    if workers <= 1 {
        while let Some(c) = next()? {
            if !each(c.at, decompress(&c))? {
                break;
            }
        }
        return Ok(());
    }
    let (jobs, queue) = mpsc::sync_channel::<Job>(workers);
    let queue = Mutex::new(queue);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| work(&queue));
        }
        // Dropped on every way out of this closure (before the scope
        // joins the workers): they then see the queue closed and end.
        let jobs = jobs;
        let mut pending: VecDeque<(u64, Receiver<Records>)> = VecDeque::new();
        let mut read_all = false;
        loop {
            while !read_all && pending.len() < 2 * workers {
                match next()? {
                    Some(c) => {
                        let (reply, answer) = mpsc::sync_channel(1);
                        let at = c.at;
                        if jobs.send((c, reply)).is_err() {
                            read_all = true;
                            break;
                        }
                        pending.push_back((at, answer));
                    }
                    None => read_all = true,
                }
            }
            let Some((at, answer)) = pending.pop_front() else {
                return Ok(());
            };
            let records = answer
                .recv()
                .unwrap_or_else(|_| Err("a decompression thread ended early".to_owned()));
            if !each(at, records)? {
                return Ok(());
            }
        }
    })
}

/// A worker: decompresses chunks from `queue` until it is closed.
fn work(queue: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job.
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok((chunk, reply)) = job else { return };
        // The reader may have stopped (damage found): nobody to answer.
        let _ = reply.send(decompress(&chunk));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};

    /// A Chunk record holding one Message record whose data is `i`.
    fn chunk_of(i: u32, compression: Compression) -> Vec<u8> {
        let mut b = ChunkBuilder::new(1 << 16);
        b.push(1, i, u64::from(i), u64::from(i), &i.to_le_bytes());
        let sealed = b
            .take()
            .seal(&mut ChunkCompressor::new(compression).unwrap());
        [sealed.head, sealed.body].concat()
    }

    fn run(workers: usize, n: u32, stop_at: Option<u32>) -> Vec<(u64, Vec<u8>)> {
        let mut i = 0;
        let mut seen = Vec::new();
        in_order::<()>(
            workers,
            || {
                if i == n {
                    return Ok(None);
                }
                i += 1;
                let comp = if i % 2 == 0 {
                    Compression::Zstd { level: 1 }
                } else {
                    Compression::Lz4
                };
                Ok(Some(RawChunk {
                    at: u64::from(i),
                    bytes: chunk_of(i, comp),
                    body_from: records::RECORD_PREFIX,
                }))
            },
            |at, records| {
                seen.push((at, records.unwrap()));
                Ok(stop_at != Some(at as u32))
            },
        )
        .unwrap();
        seen
    }

    #[test]
    fn chunks_come_back_in_the_order_they_were_read() {
        let one = run(1, 50, None);
        let many = run(4, 50, None);
        assert_eq!(one.len(), 50);
        assert_eq!(one, many);
        assert!(many.windows(2).all(|w| w[0].0 < w[1].0));
        // Stopping early ends the reading there, workers and all.
        assert_eq!(run(3, 50, Some(7)).len(), 7);
    }

    #[test]
    fn a_chunk_that_does_not_decompress_is_named_not_a_panic() {
        let mut body = chunk_of(1, Compression::Zstd { level: 1 });
        let last = body.len() - 1;
        body[last] ^= 0xff;
        body.truncate(body.len() - 3);
        let r = decompress(&RawChunk {
            at: 9,
            bytes: body,
            body_from: records::RECORD_PREFIX,
        });
        assert!(r.is_err());
        let r = decompress(&RawChunk {
            at: 9,
            bytes: vec![1, 2],
            body_from: 0,
        });
        assert!(r.unwrap_err().contains("does not parse"), "short");
    }
}
