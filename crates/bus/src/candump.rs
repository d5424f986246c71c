//! The log format of `candump -L` (can-utils), which `canplayer`, `log2asc`,
//! SavvyCAN, python-can and cantools read: one frame per line,
//!
//! ```text
//! (1436509052.249713) can0 123#DEADBEEF
//! (1436509052.250002) can0 12345678#R
//! (1436509052.250118) can1 123##1112233
//! ```
//!
//! the receive time in seconds with six decimals, the interface, and the
//! frame as can-utils' `lib.c` prints it: 3 hex digits for a standard id,
//! 8 for an extended id or an error frame (with `CAN_ERR_FLAG`), `#`, then
//! `R` and an optional length for a remote request, or the data bytes in
//! upper-case hex and `_<dlc>` for an 8-byte frame with a raw DLC of 9 to
//! 15; a CAN FD frame has `##`, one hex digit of flags, then its data.
//! [`format_line`] writes exactly that; [`parse_line`] reads it (and the
//! `.`-separated data and lower-case hex that `cansend` also accepts).

use crate::can::frame::{
    CanFrame, CAN_EFF_FLAG, CAN_EFF_MASK, CAN_ERR_FLAG, CAN_RTR_FLAG, CAN_SFF_MASK,
};

/// One line of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The receive time, ns since the epoch (the log keeps microseconds).
    pub time_ns: u64,
    /// The interface.
    pub interface: String,
    /// The frame.
    pub frame: CanFrame,
}

/// Why a line is not a candump log line; `column` counts from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {what}")]
pub struct ParseError {
    /// Where on the line.
    pub column: usize,
    /// What is wrong.
    pub what: String,
}

fn hex_upper(out: &mut String, b: u8) {
    const H: &[u8; 16] = b"0123456789ABCDEF";
    out.push(H[(b >> 4) as usize] as char);
    out.push(H[(b & 0xf) as usize] as char);
}

/// The frame as candump prints it (`123#DEADBEEF`, `123##1...`).
pub fn format_frame(f: &CanFrame, out: &mut String) {
    use std::fmt::Write as _;
    if f.is_error() {
        let _ = write!(out, "{:08X}#", f.can_id & (CAN_EFF_MASK | CAN_ERR_FLAG));
    } else if f.is_extended() {
        let _ = write!(out, "{:08X}#", f.can_id & CAN_EFF_MASK);
    } else {
        let _ = write!(out, "{:03X}#", f.can_id & CAN_SFF_MASK);
    }
    if f.fd {
        let _ = write!(out, "#{:X}", f.flags & 0xF);
        for &b in f.data() {
            hex_upper(out, b);
        }
        return;
    }
    if f.is_rtr() {
        out.push('R');
        if f.len > 0 {
            let _ = write!(out, "{}", f.len);
        }
        if f.len == 8 && f.len8_dlc > 8 {
            let _ = write!(out, "_{:X}", f.len8_dlc);
        }
        return;
    }
    for &b in f.data() {
        hex_upper(out, b);
    }
    if f.len == 8 && f.len8_dlc > 8 {
        let _ = write!(out, "_{:X}", f.len8_dlc);
    }
}

/// One log line, without the newline: `(SEC.USEC) IFACE FRAME`. The time
/// is cut (not rounded) to microseconds, as the kernel cuts the socket's
/// stamp for candump.
pub fn format_line(time_ns: u64, interface: &str, f: &CanFrame, out: &mut String) {
    use std::fmt::Write as _;
    let us = time_ns / 1_000;
    let _ = write!(
        out,
        "({:010}.{:06}) {interface} ",
        us / 1_000_000,
        us % 1_000_000
    );
    format_frame(f, out);
}

fn nibble(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Reads a frame as `cansend` and candump write it (`lib.c`
/// `parse_canframe`); `at` is the column of its first character, for
/// errors.
pub fn parse_frame(s: &str, at: usize) -> Result<CanFrame, ParseError> {
    let b = s.as_bytes();
    let err = |i: usize, what: String| ParseError {
        column: at + i,
        what,
    };
    let (digits, mut i) = match b.iter().position(|&c| c == b'#') {
        Some(3) => (3, 4),
        Some(8) => (8, 9),
        Some(n) => {
            return Err(err(
                0,
                format!(
                    "the id has {n} hex digits; a frame has 3 (standard) or 8 (extended, error)"
                ),
            ))
        }
        None => return Err(err(0, format!("`{s}` has no `#` after the id"))),
    };
    let mut can_id = 0u32;
    for (k, &c) in b[..digits].iter().enumerate() {
        let v = nibble(c).ok_or_else(|| err(k, format!("`{}` is not a hex digit", c as char)))?;
        can_id = (can_id << 4) | u32::from(v);
    }
    // candump prints an extended id as its 29 bits and an error frame as
    // its class bits under CAN_ERR_FLAG, so eight digits are at most
    // 3FFFFFFF; the EFF and RTR bits come from the syntax, never the
    // digits (which would not print back the same).
    if digits == 8 && can_id > (CAN_ERR_FLAG | CAN_EFF_MASK) {
        return Err(err(
            0,
            format!(
                "id {can_id:08X} is past 1FFFFFFF (extended) and 3FFFFFFF (an error frame, 2xxxxxxx)"
            ),
        ));
    }
    if digits == 3 && can_id > CAN_SFF_MASK {
        return Err(err(
            0,
            format!("standard id {can_id:03X} is past 7FF (11 bits); an extended id has 8 digits"),
        ));
    }
    let error_frame = can_id & CAN_ERR_FLAG != 0;
    if digits == 8 && !error_frame {
        can_id |= CAN_EFF_FLAG;
    }
    if error_frame && matches!(b.get(i), Some(b'R' | b'r' | b'#')) {
        return Err(err(
            i,
            "an error frame (2xxxxxxx) is classic data: `#` and up to 8 bytes, no `R` or `##`"
                .to_owned(),
        ));
    }
    if b.get(i).is_some_and(|&c| c == b'R' || c == b'r') {
        i += 1;
        let mut len = 0u8;
        if let Some(&c) = b.get(i) {
            if c != b'_' {
                len = nibble(c)
                    .filter(|v| *v <= 8)
                    .ok_or_else(|| err(i, "a remote frame's length is 0 to 8".to_owned()))?;
                i += 1;
            }
        }
        let mut f = CanFrame::remote(can_id & !CAN_RTR_FLAG, len);
        if b.get(i) == Some(&b'_') {
            f.len8_dlc = len8_dlc(b, i, len, &err)?;
            i += 2;
        }
        if i != b.len() {
            return Err(err(i, "unexpected text after the remote frame".to_owned()));
        }
        return Ok(f);
    }
    let (fd, flags, max) = if b.get(i) == Some(&b'#') {
        let flags = b.get(i + 1).and_then(|&c| nibble(c)).ok_or_else(|| {
            err(
                i + 1,
                "`##` must be followed by one hex digit of FD flags".to_owned(),
            )
        })?;
        i += 2;
        (true, flags, 64)
    } else {
        (false, 0, 8)
    };
    let mut data = Vec::with_capacity(max);
    while i < b.len() && b[i] != b'_' {
        if b[i] == b'.' {
            i += 1;
            continue;
        }
        if data.len() == max {
            return Err(err(i, format!("more than {max} data bytes")));
        }
        let hi =
            nibble(b[i]).ok_or_else(|| err(i, format!("`{}` is not a hex digit", b[i] as char)))?;
        let lo = b
            .get(i + 1)
            .and_then(|&c| nibble(c))
            .ok_or_else(|| err(i + 1, "data bytes are pairs of hex digits".to_owned()))?;
        data.push(hi << 4 | lo);
        i += 2;
    }
    let mut f = CanFrame::new(can_id, &data, fd, flags).map_err(|e| err(i, e.to_string()))?;
    if !fd && b.get(i) == Some(&b'_') {
        f.len8_dlc = len8_dlc(b, i, f.len, &err)?;
        i += 2;
    }
    if i != b.len() {
        return Err(err(i, "unexpected text after the data".to_owned()));
    }
    Ok(f)
}

fn len8_dlc(
    b: &[u8],
    i: usize,
    len: u8,
    err: &dyn Fn(usize, String) -> ParseError,
) -> Result<u8, ParseError> {
    let v = b.get(i + 1).and_then(|&c| nibble(c)).unwrap_or(0);
    if len != 8 || !(9..=15).contains(&v) {
        return Err(err(
            i,
            "`_<dlc>` is a raw DLC of 9 to F after exactly 8 data bytes".to_owned(),
        ));
    }
    Ok(v)
}

/// Reads one log line: `(SEC.USEC) IFACE FRAME`, and an optional
/// direction word (`R`, `T`) that `candump -x` adds, which is dropped.
/// Returns `None` for a blank line.
pub fn parse_line(line: &str) -> Result<Option<LogLine>, ParseError> {
    let line = line.trim_end_matches(['\r', '\n']);
    if line.trim().is_empty() {
        return Ok(None);
    }
    let err = |column: usize, what: &str| ParseError {
        column,
        what: what.to_owned(),
    };
    let rest = line
        .strip_prefix('(')
        .ok_or_else(|| err(1, "a candump -L line starts with (SECONDS.MICROSECONDS)"))?;
    let close = rest
        .find(')')
        .ok_or_else(|| err(1, "no `)` after the time"))?;
    let (sec, frac) = rest[..close]
        .split_once('.')
        .ok_or_else(|| err(2, "the time needs a `.` and six digits of microseconds"))?;
    let sec: u64 = sec
        .parse()
        .map_err(|_| err(2, "the seconds are not a number"))?;
    if frac.len() != 6 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return Err(err(
            3 + rest[..close].find('.').unwrap_or(0),
            "the time needs six digits of microseconds",
        ));
    }
    let us: u64 = frac.parse().unwrap_or(0);
    let time_ns = sec
        .checked_mul(1_000_000_000)
        .and_then(|s| s.checked_add(us * 1_000))
        .ok_or_else(|| err(2, "the time is too large"))?;
    let after = &rest[close + 1..];
    let mut words = after.split_ascii_whitespace();
    let end = line.chars().count() + 1;
    let interface = words
        .next()
        .ok_or_else(|| err(end, "no interface after the time"))?;
    let frame = words
        .next()
        .ok_or_else(|| err(end, "no frame after the interface"))?;
    let frame_col = line.find(frame).map_or(1, |p| p + 1);
    if let Some(extra) = words.next() {
        if !(extra == "R" || extra == "T") || words.next().is_some() {
            return Err(err(
                line.rfind(extra).map_or(1, |p| p + 1),
                "unexpected text after the frame",
            ));
        }
    }
    Ok(Some(LogLine {
        time_ns,
        interface: interface.to_owned(),
        frame: parse_frame(frame, frame_col)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(line: &str) -> String {
        let l = parse_line(line).unwrap().unwrap();
        let mut out = String::new();
        format_line(l.time_ns, &l.interface, &l.frame, &mut out);
        out
    }

    #[test]
    fn every_kind_of_line_round_trips_byte_for_byte() {
        for line in [
            "(1436509052.249713) can0 123#DEADBEEF",
            "(1436509052.249713) can0 123#",
            "(0000000001.000001) vcan0 7FF#0011223344556677",
            "(1700000000.000000) can1 12345678#01",
            "(1700000000.000000) can1 00000000#",
            "(1700000000.500000) can0 123#R",
            "(1700000000.500000) can0 123#R5",
            "(1700000000.500000) can0 12345678#R8",
            "(1700000000.500000) can0 20000080#0000000000000000",
            "(1700000000.500000) can0 321#1122334455667788_E",
            "(1700000000.500000) vcan1 123##0",
            "(1700000000.500000) vcan1 123##1112233",
            "(1700000000.500000) vcan1 1ABCDEF0##5000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F",
        ] {
            assert_eq!(round(line), line);
        }
    }

    #[test]
    fn frames_mean_what_candump_means() {
        let l = parse_line("(1436509052.249713) can0 123#DEADBEEF")
            .unwrap()
            .unwrap();
        assert_eq!(l.time_ns, 1_436_509_052_249_713_000);
        assert_eq!(
            (l.frame.ident(), l.frame.data()),
            (0x123, &[0xde, 0xad, 0xbe, 0xef][..])
        );
        let f = parse_frame("12345678#R", 1).unwrap();
        assert!(f.is_extended() && f.is_rtr());
        let f = parse_frame("20000080#0000000000000000", 1).unwrap();
        assert!(f.is_error() && !f.is_extended());
        assert_eq!(f.ident(), 0x80);
        let f = parse_frame("123##3", 1).unwrap();
        assert!(f.fd);
        assert_eq!((f.flags, f.len), (3, 0));
        // cansend's separators and lower case read the same.
        assert_eq!(
            parse_frame("1a0#de.ad.be.ef", 1).unwrap(),
            parse_frame("1A0#DEADBEEF", 1).unwrap()
        );
        // The direction word of candump -x is accepted and dropped.
        assert!(parse_line("(1.000000) can0 123#00 R").unwrap().is_some());
        assert_eq!(parse_line("   ").unwrap(), None);
    }

    #[test]
    fn mutated_lines_give_an_error_or_a_frame_never_a_panic() {
        let lines = [
            "(1436509052.249713) can0 123#DEADBEEF",
            "(1700000000.500000) can0 12345678#R8_9",
            "(1700000000.500000) vcan1 1ABCDEF0##500010203",
            "(1700000000.500000) can0 321#1122334455667788_E",
        ];
        let swaps = [
            b'#', b'R', b'_', b'.', b'(', b')', b' ', b'0', b'F', b'z', 0xff,
        ];
        let mut n = 0;
        for line in lines {
            let b = line.as_bytes();
            for at in 0..b.len() {
                for &c in &swaps {
                    let mut m = b.to_vec();
                    m[at] = c;
                    let text = String::from_utf8_lossy(&m);
                    if let Ok(Some(l)) = parse_line(&text) {
                        // What parses formats without a panic, too.
                        let mut out = String::new();
                        format_line(l.time_ns, &l.interface, &l.frame, &mut out);
                    }
                    n += 1;
                    // Cut anywhere, too.
                    let cut: String = text.chars().take(at + 1).collect();
                    let _ = parse_line(&cut);
                }
            }
        }
        assert!(n > 1000);
    }

    #[test]
    fn bad_lines_name_the_column() {
        for (line, column) in [
            ("1436509052.249713 can0 123#00", 1),
            ("(1436509052.2497) can0 123#00", 13),
            ("(x.000000) can0 123#00", 2),
            ("(1.000000) can0", 16),
            ("(1.000000) can0 1234#00", 17),
            ("(1.000000) can0 12G#00", 19),
            ("(1.000000) can0 123#0", 22),
            ("(1.000000) can0 123#001122334455667788", 37),
            ("(1.000000) can0 123#R9", 22),
            ("(1.000000) can0 123#11_9", 23),
            ("(1.000000) can0 123##", 22),
            ("(1.000000) can0 123#00 extra", 24),
            // Found by the candump_line fuzz target: the EFF and RTR bits
            // written into the id's digits printed back as another id.
            ("(1.000000) can0 FFFFFFF1##50001", 17),
            ("(1.000000) can0 40000123#00", 17),
            ("(1.000000) can0 AFF#", 17),
            // An error frame is classic data.
            ("(1.000000) can0 20000080##0", 26),
            ("(1.000000) can0 20000080#R", 26),
        ] {
            let e = parse_line(line).unwrap_err();
            assert_eq!(e.column, column, "{line}: {e}");
        }
    }
}
