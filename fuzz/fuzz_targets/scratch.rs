//! A directory of this fuzzing process's own for the targets whose code
//! under test takes a path: each input is written to a file there.

use std::path::PathBuf;
use std::sync::OnceLock;

/// `$TMPDIR/edgerec-fuzz-<pid>`, made once (on tmpfs where /dev/shm is).
pub fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("edgerec-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("fuzz scratch directory");
        d
    })
}
