//! The synthetic sensor as a [`Source`]: its rate, and its injected
//! faults.
//!
//! Rate `Hz(r)` emits message n at `start + n / r` (late messages are sent
//! at once, so the average rate holds); after a restart the schedule goes
//! on from the next sequence number, with no burst to catch up and no gap
//! in the sequence (sequence numbers count messages made, and none were
//! made while the source was down). Rate `Max` is a load generator: it
//! emits as fast as the pipeline accepts, offering a refused message again
//! (not dropping it) after a short wait; it measures the pipeline's
//! capacity.

use std::time::{Duration, Instant};

use edgerec_config::Rate;
use edgerec_source::{Dropped, Envelope, Source, SourceError, SourceSink, Stop};

use crate::encode::SyntheticSource;
use crate::fault::{FaultPlan, Strike};

impl Source for SyntheticSource {
    fn name(&self) -> String {
        format!("synthetic {}", self.cfg.topic)
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let channel = sink.register(self.spec()?)?;
        let mut faults = FaultPlan::new(self.cfg.fault, Instant::now());
        // `malformed-every` counts messages (in `encode_into`), not time.
        let faulty = self.cfg.fault.is_some_and(|f| f.is_timed());
        // Checked once per turn of the loop, and only with a fault set: at
        // 1 MHz a clock read per message is a measurable share of a core.
        let strike = |faults: &mut FaultPlan| -> Result<bool, SourceError> {
            if !faulty {
                return Ok(false);
            }
            match faults.check(Instant::now()) {
                Strike::None => Ok(false),
                Strike::Panic => panic!("injected fault: {}", faults.describe()),
                Strike::Error => Err(SourceError::Injected {
                    fault: faults.describe(),
                }),
                Strike::Stall(d) => {
                    tracing::warn!(
                        "synthetic {}: injected stall of {} ms (no messages, no liveness)",
                        self.cfg.topic,
                        d.as_millis()
                    );
                    // Silent on purpose: no push, no alive(); only a stop
                    // request (the supervisor's, once the deadline passes)
                    // ends it early.
                    Ok(stop.wait_timeout(d))
                }
            }
        };
        match self.cfg.rate {
            Rate::Max => {
                let need = (self.template.len() + 512) as u64;
                'next: while !stop.is_requested() {
                    if strike(&mut faults)? {
                        break;
                    }
                    if !sink.has_room(need) {
                        std::thread::sleep(Duration::from_micros(50));
                        continue;
                    }
                    let now = sink.now_ns();
                    self.origin_ns.get_or_insert(now);
                    let payload =
                        self.encode_into(sink.buffer(channel, self.payload_hint), self.seq, now);
                    let mut env = Envelope {
                        channel,
                        log_time: now,
                        publish_time: now,
                        payload,
                    };
                    // A load generator offers again what did not fit
                    // instead of dropping it: it measures capacity.
                    loop {
                        match sink.try_push(env) {
                            Ok(()) => break,
                            Err((Dropped::Budget | Dropped::QueueFull, back)) => {
                                if stop.is_requested() {
                                    break 'next;
                                }
                                env = back;
                                std::thread::sleep(Duration::from_micros(50));
                            }
                            Err((_, _)) => break 'next,
                        }
                    }
                    self.seq += 1;
                }
            }
            Rate::Hz(hz) => {
                let period = 1.0 / hz;
                // The schedule of this run, placed so that the next message
                // is due now.
                let start = Instant::now()
                    .checked_sub(Duration::from_secs_f64(self.seq as f64 * period))
                    .unwrap_or_else(Instant::now);
                let base = self.seq;
                while !stop.is_requested() {
                    if strike(&mut faults)? {
                        break;
                    }
                    let elapsed = start.elapsed().as_secs_f64();
                    let due = (elapsed * hz) as u64 + 1;
                    // Bounded bursts so a stop request is seen promptly.
                    let until = due.min(self.seq + 4096).max(base);
                    while self.seq < until {
                        let now = sink.now_ns();
                        self.origin_ns.get_or_insert(now);
                        let payload = self.encode_into(
                            sink.buffer(channel, self.payload_hint),
                            self.seq,
                            now,
                        );
                        // A refused push is counted by the sink; the
                        // sequence number is consumed either way, so
                        // readers see the gap.
                        let _ = sink.push(Envelope {
                            channel,
                            log_time: now,
                            publish_time: now,
                            payload,
                        });
                        self.seq += 1;
                    }
                    if self.seq >= due {
                        let next = Duration::from_secs_f64(self.seq as f64 * period);
                        let wait = next.saturating_sub(start.elapsed());
                        if wait > Duration::from_micros(20) {
                            sink.alive();
                            if wait >= Duration::from_millis(1) {
                                stop.wait_timeout(wait.min(Duration::from_millis(50)));
                            } else {
                                std::thread::sleep(wait);
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
