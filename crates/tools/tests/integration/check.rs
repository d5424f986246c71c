//! `check` of ROS 1 bags: valid ones pass; damage is named with its byte.

use crate::support::*;

#[test]
fn valid_bags_pass_and_damage_is_named_with_its_offset() {
    let Some(dir) = generated() else { return };
    for c in COMPRESSIONS {
        let bag = dir.join(format!("{c}.bag"));
        let r = tools(["check", bag.to_str().unwrap()]);
        assert!(r.status.success(), "{c}: {}", stdout(&r));
        assert!(stdout(&r).contains("917 messages"), "{}", stdout(&r));
    }
    let work = scratch("check-bad");
    let original = std::fs::read(dir.join("lz4.bag")).unwrap();
    let chunks = chunk_positions(dir, "lz4");
    // Bytes inside the fifth chunk's compressed data.
    let mut damaged = original.clone();
    let at = chunks[4] as usize + 200;
    for b in &mut damaged[at..at + 64] {
        *b ^= 0x5a;
    }
    let p = work.join("damaged.bag");
    std::fs::write(&p, &damaged).unwrap();
    let r = tools(["check", p.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1), "{}", stdout(&r));
    let text = stdout(&r);
    assert!(text.starts_with("INVALID"), "{text}");
    assert!(
        text.contains(&format!("{}", chunks[4])),
        "names the chunk at byte {}: {text}",
        chunks[4]
    );

    // Unindexed (a .bag.active): invalid, with the fix.
    let cut = work.join("run.bag.active");
    std::fs::write(&cut, &original[..chunks[10] as usize + 100]).unwrap();
    let r = tools(["check", cut.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));
    let text = stdout(&r);
    assert!(
        text.contains("not indexed") && text.contains("edgerec reindex"),
        "{text}"
    );
}
