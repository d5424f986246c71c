//! Opens a recording clock, starts the clock monitor, and prints the status
//! once a second, five times, then the segment summary:
//!
//! ```sh
//! cargo run -p edgerec-clock --example clock_status -- [realtime|tai|phc:eth0|/dev/ptp0] [/var/run/ptp4l]
//! ```

use std::path::PathBuf;
use std::time::Duration;

use edgerec_clock::{Clock, ClockMonitor, ClockSource, MonitorOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let source: ClockSource = match args.next() {
        Some(s) => s.parse()?,
        None => ClockSource::Realtime,
    };
    let socket = PathBuf::from(args.next().unwrap_or_else(|| "/var/run/ptp4l".to_string()));

    let clock = Clock::open(&source)?;
    println!("{} reads {} ns", clock.describe(), clock.now_ns());

    let monitor = ClockMonitor::start(
        MonitorOptions {
            source,
            ptp4l_socket: Some(socket),
            ..MonitorOptions::default()
        },
        || {},
    )?;
    let handle = monitor.handle();
    for _ in 0..5 {
        let s = handle.status();
        println!(
            "{}: {} (unlocked {}) offset {:?} from {:?}: {}",
            s.source, s.state, s.unlocked, s.last_offset_ns, s.offset_origin, s.reason
        );
        if let Some(p) = &s.ptp4l {
            println!(
                "  ptp4l: {} gm {} present {} path delay {} ns",
                p.port_state, p.gm_identity, p.gm_present, p.mean_path_delay_ns
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    for (k, v) in handle.segment_summary() {
        println!("  {k} = {v}");
    }
    monitor.stop();
    Ok(())
}
