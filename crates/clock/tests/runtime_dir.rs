//! The management client binds its socket in systemd's RuntimeDirectory=
//! ($RUNTIME_DIRECTORY) when the service has one: the unprivileged
//! recorder can write there, and ptp4l (in a mount namespace of its own,
//! without the recorder's PrivateTmp) can send its answer there.
//! Alone in its binary: it sets an environment variable.

use std::os::unix::net::UnixDatagram;
use std::path::Path;

use edgerec_clock::pmc::PmcClient;

#[test]
fn the_client_binds_in_systemd_s_runtime_directory() {
    let ptp = tempfile::tempdir().unwrap();
    let run = tempfile::tempdir().unwrap();
    let server = ptp.path().join("ptp4lro");
    let _listener = UnixDatagram::bind(&server).unwrap();
    // Nothing else runs in this process: the variable is ours.
    std::env::set_var(
        "RUNTIME_DIRECTORY",
        format!("{}:/elsewhere", run.path().display()),
    );
    let client = PmcClient::open(&server, 0).unwrap();
    let local = client.local_path().to_path_buf();
    assert_eq!(local.parent(), Some(run.path()), "{}", local.display());
    assert!(local.exists());
    drop(client);
    assert!(!local.exists(), "removed when the client goes");

    // A relative value is not a directory systemd would give: ignored.
    std::env::set_var("RUNTIME_DIRECTORY", "relative");
    let client = PmcClient::open(&server, 0).unwrap();
    assert_eq!(client.local_path().parent(), Some(ptp.path()));
    assert!(!Path::new("relative").exists());
}
