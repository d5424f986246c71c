//! What can go wrong naming, finding or requesting a GPIO line; every
//! message names the chip and line and says what to do.

use std::io;
use std::path::PathBuf;

/// A GPIO line could not be parsed, found or requested.
#[derive(Debug, thiserror::Error)]
pub enum GpioError {
    /// The `CHIP:LINE` text is malformed.
    #[error("`{text}` is not a GPIO line: {why}; write CHIP:LINE, e.g. \"gpiochip0:17\" or \"/dev/gpiochip2:BUTTON\"")]
    Spec {
        /// The text as given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// No chip device at that path.
    #[error("no GPIO chip {chip}: `ls /dev/gpiochip*` lists the chips (`gpioinfo` their lines); the kernel needs CONFIG_GPIO_CDEV", chip = .chip.display())]
    NoSuchChip {
        /// The chip's device path.
        chip: PathBuf,
    },
    /// The chip device may not be opened by this user.
    #[error("GPIO chip {chip}: permission denied; run edgerec as a user in the group owning it (`ls -l {chip}`), or add a udev rule giving that group access", chip = .chip.display())]
    Permission {
        /// The chip's device path.
        chip: PathBuf,
    },
    /// The path exists but is not a GPIO character device.
    #[error("{chip} is not a GPIO chip (GPIO_GET_CHIPINFO_IOCTL: {source}); name a /dev/gpiochipN", chip = .chip.display())]
    NotAChip {
        /// The path.
        chip: PathBuf,
        /// The ioctl's error.
        source: io::Error,
    },
    /// The offset is past the chip's last line.
    #[error("GPIO chip {chip} ({label}) has {lines} lines (0..={last}); there is no line {offset}", chip = .chip.display(), last = .lines.saturating_sub(1))]
    LineOutOfRange {
        /// The chip's device path.
        chip: PathBuf,
        /// The chip's driver label.
        label: String,
        /// The offset asked for.
        offset: u32,
        /// How many lines the chip has.
        lines: u32,
    },
    /// No line on the chip has that name.
    #[error("GPIO chip {chip} ({label}, {lines} lines) has no line named \"{name}\"; `gpioinfo {chip}` lists the names, or give the line's offset", chip = .chip.display())]
    NoLineNamed {
        /// The chip's device path.
        chip: PathBuf,
        /// The chip's driver label.
        label: String,
        /// The name asked for.
        name: String,
        /// How many lines the chip has.
        lines: u32,
    },
    /// Another driver or process holds the line.
    #[error("GPIO {chip} line {offset} is busy: used by {consumer}; unbind that driver (or free the pin in the device tree) or choose another line", chip = .chip.display(), consumer = if .consumer.is_empty() { "another driver or process" } else { .consumer.as_str() })]
    Busy {
        /// The chip's device path.
        chip: PathBuf,
        /// The line's offset.
        offset: u32,
        /// Who holds it, as the kernel reports it (may be empty).
        consumer: String,
    },
    /// Any other failure of the chip or line.
    #[error("GPIO {chip} line {offset}: {op}: {source}", chip = .chip.display())]
    Io {
        /// The chip's device path.
        chip: PathBuf,
        /// The line's offset, or `u32::MAX` before one is known.
        offset: u32,
        /// What was being done.
        op: &'static str,
        /// The error.
        source: io::Error,
    },
}
