//! `SourceSink::push_copy`, the DDS reader's way in: a message is charged
//! to the memory budget before its bytes are copied, so one the budget
//! refuses, however large a peer made it, costs no allocation (a counting
//! allocator in this test binary measures it), and an accepted one arrives
//! byte for byte with its charge.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use edgerec_source::{ChannelSpec, Dropped, Intake, MemoryBudget, SystemClock};

/// Bytes allocated by this process so far (never decreased).
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

struct Counting;

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn spec(topic: &str) -> ChannelSpec {
    ChannelSpec {
        topic: topic.into(),
        type_name: "edgerec_test/msg/Blob".into(),
        message_encoding: "cdr".into(),
        schema_encoding: "ros2msg".into(),
        schema: b"uint8[] data\n".to_vec(),
        metadata: BTreeMap::new(),
        latched: false,
    }
}

#[test]
fn a_message_the_budget_refuses_is_never_copied_and_an_accepted_one_arrives_whole() {
    let intake = Intake::new(
        1 << 10,
        MemoryBudget::with_reserve(16 << 20, 8 << 20),
        Arc::new(SystemClock),
    );
    let sink = intake.sink();
    let ch = sink.register(spec("/camera/image_raw")).unwrap();
    let other = sink.register(spec("/imu")).unwrap();

    // 64 MiB from a peer, four times the whole budget.
    let huge = vec![7u8; 64 << 20];
    let before = ALLOCATED.load(Ordering::Relaxed);
    assert_eq!(sink.push_copy(ch, 1, 1, &huge), Err(Dropped::Budget));
    let spent = ALLOCATED.load(Ordering::Relaxed) - before;
    assert!(
        spent < 64 << 10,
        "{spent} bytes allocated for a refused message"
    );
    let table = intake.table();
    assert_eq!(
        table
            .get(ch)
            .unwrap()
            .counters
            .dropped
            .load(Ordering::Relaxed),
        1
    );
    assert_eq!(intake.budget().used(), 0);

    // What fits is taken, copied exactly, and charged.
    let msg: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    sink.push_copy(ch, 5, 4, &msg).unwrap();
    sink.push_copy(other, 6, 6, b"imu").unwrap();
    assert!(intake.budget().used() >= msg.len() as u64);
    let c = table.get(ch).unwrap();
    assert_eq!(c.counters.accepted.load(Ordering::Relaxed), 1);
    let mut out = Vec::new();
    assert_eq!(intake.pop_into(c, &mut out, 16), 1);
    assert_eq!(out[0].env.payload, msg);
    assert_eq!((out[0].env.log_time, out[0].env.publish_time), (5, 4));
    for q in out {
        intake.release(c, q.charge);
    }

    // Paused: refused and counted, nothing charged.
    intake.set_paused(true);
    assert_eq!(sink.push_copy(ch, 7, 7, &msg), Err(Dropped::Paused));
    assert_eq!(c.counters.dropped.load(Ordering::Relaxed), 2);
}
