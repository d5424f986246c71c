//! Bags this reader refuses, with a message that says why.

use edgerec_rosbag1::{Bag, Error};

use crate::support::generated;

#[test]
fn an_encrypted_bag_is_refused_naming_its_encryptor() {
    let Some(dir) = generated() else { return };
    let path = dir.join("encrypted.bag");
    for result in [Bag::open(&path), Bag::scan(&path)] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::Encrypted { encryptor } if encryptor == "rosbag/AesCbcEncryptor"),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("encrypted") && text.contains("rosbag/AesCbcEncryptor"),
            "{text}"
        );
    }
    let dst = crate::support::scratch("encrypted").join("out.bag");
    assert!(matches!(
        edgerec_rosbag1::reindex(&path, &dst),
        Err(Error::Encrypted { .. })
    ));
    assert!(!dst.exists());
}

#[test]
fn an_mcap_file_is_not_a_bag() {
    let dir = crate::support::scratch("mcap");
    let path = dir.join("x.mcap");
    std::fs::write(&path, b"\x89MCAP0\r\n\x01").unwrap();
    assert!(matches!(Bag::open(&path), Err(Error::BadMagic { .. })));
}
