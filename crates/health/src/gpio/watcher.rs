//! The thread that watches one requested GPIO line and reports its
//! debounced edges.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::sys::{self, LineEvent, LineRequest};
use super::{Debouncer, EdgeSelect, GpioError, LineRef, LineSpec};

/// How long the thread waits on the line before it looks at the stop flag:
/// the bound on how late [`LineWatcher::stop`] returns.
const POLL_MS: i32 = 100;
/// Events read at once; the kernel keeps 16 per line by default.
const READ_BATCH: usize = 16;

/// One edge the watcher accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Low to high (true) or high to low.
    pub rising: bool,
    /// When the kernel saw it, CLOCK_MONOTONIC nanoseconds.
    pub timestamp_ns: u64,
}

impl Edge {
    /// The edge a kernel event reports; `None` for an unknown event id.
    pub fn from_event(e: &LineEvent) -> Option<Edge> {
        let rising = match e.id {
            sys::EVENT_RISING_EDGE => true,
            sys::EVENT_FALLING_EDGE => false,
            _ => return None,
        };
        Some(Edge {
            rising,
            timestamp_ns: e.timestamp_ns,
        })
    }
}

/// What the watcher calls for each accepted edge, on its own thread.
pub type OnEdge = Box<dyn FnMut(Edge) + Send>;

/// A requested GPIO input line and the thread watching it. The line stays
/// requested (`gpioinfo` shows the consumer label) until [`stop`] or drop,
/// which return within about 100 ms.
///
/// [`stop`]: LineWatcher::stop
pub struct LineWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    offset: u32,
    chip_label: String,
    kernel_debounce: bool,
}

impl std::fmt::Debug for LineWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineWatcher")
            .field("offset", &self.offset)
            .field("chip_label", &self.chip_label)
            .field("kernel_debounce", &self.kernel_debounce)
            .finish()
    }
}

impl LineWatcher {
    /// Requests the line of `spec` as an input reporting its edges,
    /// labelled `consumer` (what `gpioinfo` shows, cut to 31 bytes), and
    /// starts the thread that calls `on_edge` for each edge that passes the
    /// debounce.
    pub fn start(spec: &LineSpec, consumer: &str, on_edge: OnEdge) -> Result<Self, GpioError> {
        let (line, offset, chip_label, kernel_debounce) = request(spec, consumer)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let debouncer = Debouncer::new(spec.debounce);
        let chip = spec.chip.clone();
        let thread = std::thread::Builder::new()
            .name("edgerec-gpio".into())
            .spawn(move || watch(line, flag, debouncer, on_edge, &chip, offset))
            .map_err(|source| GpioError::Io {
                chip: spec.chip.clone(),
                offset,
                op: "starting the watcher thread",
                source,
            })?;
        Ok(LineWatcher {
            stop,
            thread: Some(thread),
            offset,
            chip_label,
            kernel_debounce,
        })
    }

    /// The line's offset on its chip (a name is resolved to it).
    pub fn offset(&self) -> u32 {
        self.offset
    }

    /// The chip's driver label (`tegra234-gpio`, `9030000.pl061`).
    pub fn chip_label(&self) -> &str {
        &self.chip_label
    }

    /// Whether the kernel debounces the line too (`GPIO_V2_LINE_ATTR_ID_
    /// DEBOUNCE`, Linux 5.10 and later); the watcher's own debounce applies
    /// either way.
    pub fn kernel_debounce(&self) -> bool {
        self.kernel_debounce
    }

    /// Whether the thread still watches (false after a read error, which
    /// it logs).
    pub fn is_watching(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the thread and releases the line; returns within about 100 ms.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // A panic in `on_edge` ended the thread already; nothing to add.
            let _ = t.join();
        }
    }
}

impl Drop for LineWatcher {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Opens the chip, finds the line and requests it: (line fd, offset, chip
/// label, whether the kernel debounces).
fn request(spec: &LineSpec, consumer: &str) -> Result<(OwnedFd, u32, String, bool), GpioError> {
    let chip_path = &spec.chip;
    let io_err = |offset: u32, op: &'static str| {
        move |source: io::Error| GpioError::Io {
            chip: chip_path.clone(),
            offset,
            op,
            source,
        }
    };
    let chip = OpenOptions::new()
        .read(true)
        .write(true)
        .open(chip_path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => GpioError::NoSuchChip {
                chip: chip_path.clone(),
            },
            io::ErrorKind::PermissionDenied => GpioError::Permission {
                chip: chip_path.clone(),
            },
            _ => io_err(u32::MAX, "opening the chip")(e),
        })?;
    let info = sys::chip_info(chip.as_fd()).map_err(|source| GpioError::NotAChip {
        chip: chip_path.clone(),
        source,
    })?;
    let label = sys::name_str(&info.label);
    let offset = match &spec.line {
        LineRef::Offset(o) if *o < info.lines => *o,
        LineRef::Offset(o) => {
            return Err(GpioError::LineOutOfRange {
                chip: chip_path.clone(),
                label,
                offset: *o,
                lines: info.lines,
            })
        }
        LineRef::Name(name) => {
            let mut found = None;
            for o in 0..info.lines {
                let li = sys::line_info(chip.as_fd(), o).map_err(io_err(o, "reading line info"))?;
                if sys::name_str(&li.name) == *name {
                    found = Some(o);
                    break;
                }
            }
            found.ok_or_else(|| GpioError::NoLineNamed {
                chip: chip_path.clone(),
                label: label.clone(),
                name: name.clone(),
                lines: info.lines,
            })?
        }
    };
    let busy = |consumer: String| GpioError::Busy {
        chip: chip_path.clone(),
        offset,
        consumer,
    };
    // Asked first so the error can name who holds the line; the request
    // below still catches a race.
    let li = sys::line_info(chip.as_fd(), offset).map_err(io_err(offset, "reading line info"))?;
    if li.flags & sys::FLAG_USED != 0 {
        return Err(busy(sys::name_str(&li.consumer)));
    }
    let edges = match spec.edge {
        EdgeSelect::Rising => sys::FLAG_EDGE_RISING,
        EdgeSelect::Falling => sys::FLAG_EDGE_FALLING,
        EdgeSelect::Both => sys::FLAG_EDGE_RISING | sys::FLAG_EDGE_FALLING,
    };
    let debounce_us = u32::try_from(spec.debounce.as_micros()).unwrap_or(u32::MAX);
    let mut kernel_debounce = debounce_us > 0;
    let first = sys::get_line(
        chip.as_fd(),
        LineRequest::input(offset, consumer, edges, debounce_us),
    );
    let line = match first {
        // Kernels before 5.10 know no debounce attribute; the watcher's
        // own debounce is enough for a switch.
        Err(e) if kernel_debounce && e.raw_os_error() == Some(libc::EINVAL) => {
            kernel_debounce = false;
            sys::get_line(chip.as_fd(), LineRequest::input(offset, consumer, edges, 0))
        }
        other => other,
    }
    .map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => busy(String::new()),
        _ => io_err(offset, "requesting the line (GPIO_V2_GET_LINE_IOCTL)")(e),
    })?;
    set_nonblocking(&line).map_err(io_err(offset, "setting O_NONBLOCK"))?;
    Ok((line, offset, label, kernel_debounce))
}

/// A poll that said readable and a read that then finds nothing must not
/// block the thread past its stop check.
fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: F_GETFL on an open fd takes no argument.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: F_SETFL on an open fd with an int of flags.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The thread: waits on the line, hands on the edges the debouncer
/// accepts, ends on `stop` or on an error (logged).
fn watch(
    line: OwnedFd,
    stop: Arc<AtomicBool>,
    mut debouncer: Debouncer,
    mut on_edge: OnEdge,
    chip: &std::path::Path,
    offset: u32,
) {
    let mut buf = [LineEvent::default(); READ_BATCH];
    while !stop.load(Ordering::Relaxed) {
        let result = sys::poll_readable(line.as_fd(), POLL_MS).and_then(|ready| {
            if ready {
                sys::read_events(line.as_fd(), &mut buf)
            } else {
                Ok(0)
            }
        });
        let n = match result {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                tracing::error!(
                    "GPIO {} line {offset}: reading edge events failed, the line is no longer watched: {e}",
                    chip.display()
                );
                return;
            }
        };
        for ev in &buf[..n] {
            if let Some(edge) = Edge::from_event(ev) {
                if debouncer.accept(edge.timestamp_ns) {
                    on_edge(edge);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    #[test]
    fn events_decode_to_edges() {
        let r = Edge::from_event(&LineEvent::new(5, sys::EVENT_RISING_EDGE, 3));
        assert_eq!(
            r,
            Some(Edge {
                rising: true,
                timestamp_ns: 5
            })
        );
        let f = Edge::from_event(&LineEvent::new(9, sys::EVENT_FALLING_EDGE, 3));
        assert_eq!(
            f,
            Some(Edge {
                rising: false,
                timestamp_ns: 9
            })
        );
        assert_eq!(Edge::from_event(&LineEvent::new(9, 7, 3)), None);
    }

    #[test]
    fn a_missing_chip_is_named_with_the_fix() {
        let spec = LineSpec::parse("/nonexistent/gpiochip9:3").unwrap();
        let e = LineWatcher::start(&spec, "test", Box::new(|_| {})).unwrap_err();
        assert!(matches!(e, GpioError::NoSuchChip { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("/nonexistent/gpiochip9") && text.contains("ls /dev/gpiochip*"),
            "{text}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_chip_is_refused() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let spec = LineSpec::parse(&format!("{}:0", f.path().display())).unwrap();
        let e = LineWatcher::start(&spec, "test", Box::new(|_| {})).unwrap_err();
        assert!(matches!(e, GpioError::NotAChip { .. }), "{e:?}");
        assert!(e.to_string().contains("is not a GPIO chip"), "{e}");
    }

    #[test]
    fn busy_and_range_errors_say_who_and_how_many() {
        let busy = GpioError::Busy {
            chip: PathBuf::from("/dev/gpiochip0"),
            offset: 3,
            consumer: "gpio-keys".into(),
        };
        assert!(busy.to_string().contains("used by gpio-keys"), "{busy}");
        let range = GpioError::LineOutOfRange {
            chip: PathBuf::from("/dev/gpiochip0"),
            label: "9030000.pl061".into(),
            offset: 8,
            lines: 8,
        };
        assert!(
            range
                .to_string()
                .contains("has 8 lines (0..=7); there is no line 8"),
            "{range}"
        );
    }

    /// The chips of this machine, when it has any; the CI kernels have
    /// none (the QEMU board test, tests/qemu, drives a real line).
    fn chips() -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir("/dev")
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("gpiochip"))
        });
        v.sort();
        v
    }

    #[test]
    fn real_chips_report_their_lines_and_refuse_a_line_past_the_end() {
        let chips = chips();
        if chips.is_empty() {
            println!("skipped: no /dev/gpiochip* on this machine (CONFIG_GPIO_CDEV and a GPIO controller needed)");
            return;
        }
        for chip in chips {
            let f = match OpenOptions::new().read(true).write(true).open(&chip) {
                Ok(f) => f,
                Err(e) => {
                    println!("skipped {}: {e}", chip.display());
                    continue;
                }
            };
            let info = sys::chip_info(f.as_fd()).unwrap();
            assert!(info.lines > 0, "{}: no lines", chip.display());
            let spec = LineSpec {
                chip: chip.clone(),
                line: LineRef::Offset(info.lines),
                edge: EdgeSelect::Rising,
                debounce: Duration::ZERO,
            };
            let e = LineWatcher::start(&spec, "edgerec-test", Box::new(|_| {})).unwrap_err();
            assert!(
                matches!(e, GpioError::LineOutOfRange { lines, .. } if lines == info.lines),
                "{e:?}"
            );
            let spec = LineSpec {
                line: LineRef::Name("edgerec-no-such-line".into()),
                ..spec
            };
            let e = LineWatcher::start(&spec, "edgerec-test", Box::new(|_| {})).unwrap_err();
            assert!(matches!(e, GpioError::NoLineNamed { .. }), "{e:?}");
            // A free line can be requested, and the watcher lets go of it
            // promptly.
            let free = (0..info.lines).find(|&o| {
                sys::line_info(f.as_fd(), o).is_ok_and(|li| li.flags & sys::FLAG_USED == 0)
            });
            if let Some(o) = free {
                let spec = LineSpec {
                    line: LineRef::Offset(o),
                    ..spec
                };
                let w = LineWatcher::start(&spec, "edgerec-test", Box::new(|_| {})).unwrap();
                assert!(w.is_watching());
                let used = sys::line_info(f.as_fd(), o).unwrap();
                assert_ne!(used.flags & sys::FLAG_USED, 0);
                assert_eq!(sys::name_str(&used.consumer), "edgerec-test");
                let t = Instant::now();
                w.stop();
                assert!(
                    t.elapsed() < Duration::from_millis(500),
                    "stop took {:?}",
                    t.elapsed()
                );
                let e = LineWatcher::start(&spec, "x", Box::new(|_| {}));
                assert!(e.is_ok(), "the line was not released: {e:?}");
            }
        }
    }
}
