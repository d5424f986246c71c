//! The GPIO character device's uAPI v2 (`include/uapi/linux/gpio.h`): the
//! `repr(C)` structs the kernel reads and writes, their ioctl numbers and
//! the thin `unsafe` wrappers around them. Nothing here decides anything;
//! [`super::LineWatcher`] does.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `GPIO_MAX_NAME_SIZE`: chip and line names, consumer labels.
pub const MAX_NAME: usize = 32;
/// `GPIO_V2_LINES_MAX`: lines in one request.
const LINES_MAX: usize = 64;
/// `GPIO_V2_LINE_NUM_ATTRS_MAX`.
const NUM_ATTRS_MAX: usize = 10;

/// `GPIO_V2_LINE_FLAG_USED`: the line is held by a driver or a request.
pub const FLAG_USED: u64 = 1 << 0;
/// `GPIO_V2_LINE_FLAG_INPUT`.
pub const FLAG_INPUT: u64 = 1 << 2;
/// `GPIO_V2_LINE_FLAG_EDGE_RISING`.
pub const FLAG_EDGE_RISING: u64 = 1 << 4;
/// `GPIO_V2_LINE_FLAG_EDGE_FALLING`.
pub const FLAG_EDGE_FALLING: u64 = 1 << 5;

/// `GPIO_V2_LINE_ATTR_ID_DEBOUNCE`.
const ATTR_ID_DEBOUNCE: u32 = 3;

/// `GPIO_V2_LINE_EVENT_RISING_EDGE`.
pub const EVENT_RISING_EDGE: u32 = 1;
/// `GPIO_V2_LINE_EVENT_FALLING_EDGE`.
pub const EVENT_FALLING_EDGE: u32 = 2;

/// `struct gpiochip_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ChipInfo {
    /// The kernel's name of the chip (`gpiochip0`), NUL-padded.
    pub name: [u8; MAX_NAME],
    /// The driver's label (`9030000.pl061`, `tegra234-gpio`), NUL-padded.
    pub label: [u8; MAX_NAME],
    /// How many lines the chip has.
    pub lines: u32,
}

/// The value of a `struct gpio_v2_line_attribute`, a union in the header.
#[repr(C)]
#[derive(Clone, Copy)]
pub union AttrValue {
    /// `flags`: for `GPIO_V2_LINE_ATTR_ID_FLAGS`.
    pub flags: u64,
    /// `debounce_period_us`: for `GPIO_V2_LINE_ATTR_ID_DEBOUNCE`.
    pub debounce_period_us: u32,
}

/// `struct gpio_v2_line_attribute`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LineAttribute {
    /// `GPIO_V2_LINE_ATTR_ID_*`.
    pub id: u32,
    padding: u32,
    /// Which member is meant follows from `id`.
    pub value: AttrValue,
}

/// `struct gpio_v2_line_config_attribute`.
#[repr(C)]
#[derive(Clone, Copy)]
struct LineConfigAttribute {
    attr: LineAttribute,
    /// The lines of the request (bits by index) the attribute applies to.
    mask: u64,
}

/// `struct gpio_v2_line_config`.
#[repr(C)]
#[derive(Clone, Copy)]
struct LineConfig {
    flags: u64,
    num_attrs: u32,
    padding: [u32; 5],
    attrs: [LineConfigAttribute; NUM_ATTRS_MAX],
}

/// `struct gpio_v2_line_request`: `GPIO_V2_GET_LINE_IOCTL`'s argument; the
/// kernel fills `fd`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LineRequest {
    offsets: [u32; LINES_MAX],
    consumer: [u8; MAX_NAME],
    config: LineConfig,
    num_lines: u32,
    event_buffer_size: u32,
    padding: [u32; 5],
    fd: i32,
}

/// `struct gpio_v2_line_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LineInfo {
    /// The line's name (from the device tree's `gpio-line-names`), or empty.
    pub name: [u8; MAX_NAME],
    /// Who holds it (a driver or a request's consumer label), or empty.
    pub consumer: [u8; MAX_NAME],
    /// Its offset on the chip; set by the caller before the ioctl.
    pub offset: u32,
    num_attrs: u32,
    /// `GPIO_V2_LINE_FLAG_*`.
    pub flags: u64,
    attrs: [LineAttribute; NUM_ATTRS_MAX],
    padding: [u32; 4],
}

/// `struct gpio_v2_line_event`: what a read of the line's fd returns, one
/// or more of them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineEvent {
    /// When the kernel saw the edge, CLOCK_MONOTONIC unless the request
    /// asked for another clock.
    pub timestamp_ns: u64,
    /// `GPIO_V2_LINE_EVENT_RISING_EDGE` or `..._FALLING_EDGE`.
    pub id: u32,
    /// The line's offset on the chip.
    pub offset: u32,
    /// Sequence number of the event among all the request's lines.
    pub seqno: u32,
    /// Sequence number of the event on this line.
    pub line_seqno: u32,
    padding: [u32; 6],
}

impl LineEvent {
    /// An event as the kernel would report it (tests and decoding).
    pub fn new(timestamp_ns: u64, id: u32, offset: u32) -> Self {
        LineEvent {
            timestamp_ns,
            id,
            offset,
            ..Default::default()
        }
    }
}

impl LineRequest {
    /// A request for one input line reporting `edge_flags`
    /// (`FLAG_EDGE_*`), with the kernel's debounce when `debounce_us` is not
    /// zero, labelled `consumer` (cut to 31 bytes).
    pub fn input(offset: u32, consumer: &str, edge_flags: u64, debounce_us: u32) -> Self {
        // SAFETY: every field is an integer, an array of integers or a
        // union of integers, for which all-zero bytes are a valid value
        // (and what the kernel expects of the padding).
        let mut r: LineRequest = unsafe { std::mem::zeroed() };
        r.offsets[0] = offset;
        r.num_lines = 1;
        copy_name(&mut r.consumer, consumer);
        r.config.flags = FLAG_INPUT | edge_flags;
        if debounce_us > 0 {
            r.config.num_attrs = 1;
            r.config.attrs[0] = LineConfigAttribute {
                attr: LineAttribute {
                    id: ATTR_ID_DEBOUNCE,
                    padding: 0,
                    value: AttrValue {
                        debounce_period_us: debounce_us,
                    },
                },
                mask: 1,
            };
        }
        r
    }
}

/// Copies `text` into a NUL-terminated fixed-size name, cut on a UTF-8
/// boundary to fit.
fn copy_name(dst: &mut [u8; MAX_NAME], text: &str) {
    let mut n = text.len().min(MAX_NAME - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    dst[..n].copy_from_slice(&text.as_bytes()[..n]);
}

/// A NUL-padded name as text.
pub fn name_str(raw: &[u8; MAX_NAME]) -> String {
    let n = raw.iter().position(|&b| b == 0).unwrap_or(MAX_NAME);
    String::from_utf8_lossy(&raw[..n]).into_owned()
}

/// ioctl numbers as `asm-generic/ioctl.h` builds them (x86, arm, arm64,
/// riscv): direction in bits 30-31, size in 16-29, type in 8-15, number
/// in 0-7.
const fn ioc(dir: u32, nr: u8, size: usize) -> u32 {
    (dir << 30) | ((size as u32 & 0x3fff) << 16) | (0xB4 << 8) | nr as u32
}
const READ: u32 = 2;
const READ_WRITE: u32 = 3;

/// `GPIO_GET_CHIPINFO_IOCTL`.
pub const GET_CHIPINFO: u32 = ioc(READ, 0x01, std::mem::size_of::<ChipInfo>());
/// `GPIO_V2_GET_LINEINFO_IOCTL`.
pub const GET_LINEINFO: u32 = ioc(READ_WRITE, 0x05, std::mem::size_of::<LineInfo>());
/// `GPIO_V2_GET_LINE_IOCTL`.
pub const GET_LINE: u32 = ioc(READ_WRITE, 0x07, std::mem::size_of::<LineRequest>());

/// Runs `request` with `arg` on `fd`, retrying on `EINTR`.
///
/// # Safety
/// `request` must be an ioctl whose argument is a `T` (the numbers above
/// encode the size of the struct they take).
unsafe fn ioctl<T>(fd: BorrowedFd<'_>, request: u32, arg: &mut T) -> io::Result<()> {
    loop {
        // SAFETY: the fd is open for the borrow; `arg` is a live, writable
        // `T` of the size the request encodes (the caller's promise).
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg as *mut T) };
        if rc >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `GPIO_GET_CHIPINFO_IOCTL` on an open chip.
pub fn chip_info(chip: BorrowedFd<'_>) -> io::Result<ChipInfo> {
    // SAFETY: all-integer struct; zero is valid.
    let mut info: ChipInfo = unsafe { std::mem::zeroed() };
    // SAFETY: GET_CHIPINFO takes a `struct gpiochip_info`.
    unsafe { ioctl(chip, GET_CHIPINFO, &mut info)? };
    Ok(info)
}

/// `GPIO_V2_GET_LINEINFO_IOCTL` for the line at `offset`.
pub fn line_info(chip: BorrowedFd<'_>, offset: u32) -> io::Result<LineInfo> {
    // SAFETY: integers and unions of integers; zero is valid (and the
    // kernel requires the padding zeroed).
    let mut info: LineInfo = unsafe { std::mem::zeroed() };
    info.offset = offset;
    // SAFETY: GET_LINEINFO takes a `struct gpio_v2_line_info`.
    unsafe { ioctl(chip, GET_LINEINFO, &mut info)? };
    Ok(info)
}

/// `GPIO_V2_GET_LINE_IOCTL`: the request's line fd, which the caller owns.
pub fn get_line(chip: BorrowedFd<'_>, mut request: LineRequest) -> io::Result<OwnedFd> {
    // SAFETY: GET_LINE takes a `struct gpio_v2_line_request`.
    unsafe { ioctl(chip, GET_LINE, &mut request)? };
    if request.fd < 0 {
        return Err(io::Error::other("GPIO_V2_GET_LINE_IOCTL returned no fd"));
    }
    // SAFETY: on success the kernel put a new fd, owned by nobody else,
    // into `request.fd`.
    Ok(unsafe { OwnedFd::from_raw_fd(request.fd) })
}

/// Waits up to `timeout_ms` for the line fd to be readable: true when it
/// is (or has an error to report on read), false on timeout or EINTR.
pub fn poll_readable(fd: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd, count 1.
    let rc = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(rc > 0 && p.revents != 0)
}

/// Reads the events waiting on a line fd into `buf`; how many. The kernel
/// hands out whole events only.
pub fn read_events(fd: BorrowedFd<'_>, buf: &mut [LineEvent]) -> io::Result<usize> {
    let size = std::mem::size_of_val(buf);
    loop {
        // SAFETY: `buf` is live and writable for `size` bytes, and any
        // bytes are a valid `LineEvent` (integers only).
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), size) };
        if n >= 0 {
            return Ok(n as usize / std::mem::size_of::<LineEvent>());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn struct_sizes_match_the_kernel_abi() {
        assert_eq!(size_of::<ChipInfo>(), 68);
        assert_eq!(size_of::<LineAttribute>(), 16);
        assert_eq!(size_of::<LineConfigAttribute>(), 24);
        assert_eq!(size_of::<LineConfig>(), 272);
        assert_eq!(size_of::<LineRequest>(), 592);
        assert_eq!(size_of::<LineInfo>(), 256);
        assert_eq!(size_of::<LineEvent>(), 48);
    }

    #[test]
    fn field_offsets_match_the_kernel_abi() {
        assert_eq!(offset_of!(LineRequest, consumer), 256);
        assert_eq!(offset_of!(LineRequest, config), 288);
        assert_eq!(offset_of!(LineRequest, num_lines), 560);
        assert_eq!(offset_of!(LineRequest, fd), 588);
        assert_eq!(offset_of!(LineInfo, offset), 64);
        assert_eq!(offset_of!(LineInfo, flags), 72);
        assert_eq!(offset_of!(LineEvent, id), 8);
        assert_eq!(offset_of!(LineEvent, line_seqno), 20);
    }

    #[test]
    fn ioctl_numbers_match_the_kernel_header() {
        // From a C program printing the macros of linux/gpio.h (6.1).
        assert_eq!(GET_CHIPINFO, 0x8044_B401);
        assert_eq!(GET_LINEINFO, 0xC100_B405);
        assert_eq!(GET_LINE, 0xC250_B407);
    }

    #[test]
    fn an_input_request_sets_edges_debounce_and_a_cut_label() {
        let r = LineRequest::input(17, &"x".repeat(40), FLAG_EDGE_RISING, 50_000);
        assert_eq!(r.offsets[0], 17);
        assert_eq!(r.num_lines, 1);
        assert_eq!(r.config.flags, FLAG_INPUT | FLAG_EDGE_RISING);
        assert_eq!(r.config.num_attrs, 1);
        assert_eq!(r.config.attrs[0].attr.id, ATTR_ID_DEBOUNCE);
        assert_eq!(r.config.attrs[0].mask, 1);
        // SAFETY: the member written by `input`.
        assert_eq!(
            unsafe { r.config.attrs[0].attr.value.debounce_period_us },
            50_000
        );
        assert_eq!(name_str(&r.consumer).len(), 31);
        let plain = LineRequest::input(3, "edgerec", FLAG_EDGE_RISING | FLAG_EDGE_FALLING, 0);
        assert_eq!(plain.config.num_attrs, 0);
        assert_eq!(name_str(&plain.consumer), "edgerec");
    }
}
