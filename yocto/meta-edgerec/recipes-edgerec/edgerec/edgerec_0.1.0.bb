SUMMARY = "edgerec: robot and vehicle data recorder writing rosbag2 MCAP to NVMe"
DESCRIPTION = "Records sensor topics into rosbag2-compatible MCAP bag \
               directories with io_uring and O_DIRECT, never blocking a source \
               and counting every drop. Also installs the board's systemd \
               units, udev rules, PTP configuration and default recorder \
               configuration from board/${EDGEREC_BOARD}/."
HOMEPAGE = "https://example.invalid/edgerec"
BUGTRACKER = "https://example.invalid/edgerec/issues"
SECTION = "console/utils"
LICENSE = "Apache-2.0"
# The repository's own LICENSE (the Apache License 2.0 text as apache.org
# publishes it); scripts/yocto-check compares LICENSE with Cargo.toml's
# workspace.package.license and this md5 with the file.
LIC_FILES_CHKSUM = "file://LICENSE;md5=3b83ef96387f14655fc854ddc3c6bd57"
# Not a product any CVE names; keeps cve-check from matching other
# projects called "edgerec".
CVE_PRODUCT = "edgerec"

# cyclors (the ROS 2 DDS backend) builds the vendored Cyclone DDS with
# cmake and generates its bindings with bindgen, which loads libclang
# (meta-clang). Not built here yet: unverified until a build host runs
# `kas build`.
DEPENDS = "clang-native cmake-native"
# edgerec-camera links libgstreamer-1.0, libgstbase-1.0 and libgstapp-1.0
# (gstreamer-rs 0.24's -sys crates find them with pkg-config: pkgconfig
# below; cargo_common.bbclass exports PKG_CONFIG_ALLOW_CROSS).
DEPENDS += "gstreamer1.0 gstreamer1.0-plugins-base"

# The source is this repository (workspace.package.repository in
# Cargo.toml; scripts/yocto-check keeps the two in step). The kas files
# build the checkout itself through externalsrc instead, which drops this
# git entry and keeps the crate:// entries. A release build sets
# EDGEREC_SRCREV to the tagged commit; the all-zero default is a
# placeholder that fails the fetch loudly rather than building something
# unpinned (no AUTOREV).
EDGEREC_GIT_URI ?= "git://example.invalid/edgerec;protocol=https;branch=main"
EDGEREC_SRCREV ?= "0000000000000000000000000000000000000000"
SRC_URI = "${EDGEREC_GIT_URI}"
SRCREV = "${EDGEREC_SRCREV}"
S = "${WORKDIR}/git"

# Every crate of Cargo.lock as a crate:// entry with its checksum, written
# by scripts/yocto-crates (or `bitbake -c update_crates edgerec`). cargo
# builds --frozen from these, offline.
require ${BPN}-crates.inc

inherit cargo cargo-update-recipe-crates pkgconfig systemd useradd

# The recorder's system user and group (edgerec.service runs as edgerec,
# not root), made at build time on the read-only root file system; the
# same as the board's sysusers.d/edgerec.conf.
USERADD_PACKAGES = "${PN}"
GROUPADD_PARAM:${PN} = "--system edgerec"
USERADD_PARAM:${PN} = "--system --no-create-home --home-dir ${EDGEREC_DATA_DIR}/edgerec --shell /sbin/nologin --gid edgerec edgerec"

# See DEPENDS: libclang for bindgen, which parses the target's headers
# with the target's flags (the sysroot is in TOOLCHAIN_OPTIONS), not the
# build host's.
export LIBCLANG_PATH = "${STAGING_LIBDIR_NATIVE}"
BINDGEN_EXTRA_CLANG_ARGS = "${HOST_CC_ARCH}${TOOLCHAIN_OPTIONS} --target=${TARGET_SYS}"
export BINDGEN_EXTRA_CLANG_ARGS

# Build only the edgerec binary: the workspace also holds the benchmark and
# test helpers. Cargo features of crates/edgerec: none by default; the
# meta-ros2 bbappend in dynamic-layers adds ros2.
EDGEREC_CARGO_FEATURES ??= ""
CARGO_BUILD_FLAGS:append = " --package edgerec ${@'--features ' + ','.join(d.getVar('EDGEREC_CARGO_FEATURES').split()) if d.getVar('EDGEREC_CARGO_FEATURES').split() else ''}"

# The board directory whose files go into the image. tegra234 is the
# SOC_FAMILY override of meta-tegra's tegra234.inc (every Orin module).
EDGEREC_BOARD ?= "qemuarm64"
EDGEREC_BOARD:tegra234 = "jetson-agx-orin"

# Board files differ per machine.
PACKAGE_ARCH = "${MACHINE_ARCH}"

do_install() {
    install -D -m 0755 ${B}/target/${CARGO_TARGET_SUBDIR}/edgerec ${D}${bindir}/edgerec

    board="${S}/board/${EDGEREC_BOARD}"
    if [ ! -d "$board" ]; then
        bbfatal "board/${EDGEREC_BOARD} is missing from the source tree: set EDGEREC_BOARD to a directory under board/"
    fi

    # The default configuration; edgerec-seed-config.service copies it to
    # /data/edgerec/edgerec.toml on first boot.
    install -D -m 0644 "$board/edgerec.toml" ${D}${datadir}/edgerec/edgerec.toml

    install -d ${D}${nonarch_base_libdir}/udev/rules.d
    for f in "$board"/udev/*.rules; do
        [ -e "$f" ] || continue
        install -m 0644 "$f" ${D}${nonarch_base_libdir}/udev/rules.d/
    done

    install -D -m 0644 "$board/sysusers.d/edgerec.conf" ${D}${nonarch_libdir}/sysusers.d/edgerec.conf

    # install(1) follows symlinks: board/qemuarm64 may link to
    # ../jetson-agx-orin files.
    install -d ${D}${systemd_system_unitdir}
    for f in "$board"/systemd/*.service "$board"/systemd/*.mount "$board"/systemd/*.timer; do
        [ -e "$f" ] || continue
        install -m 0644 "$f" ${D}${systemd_system_unitdir}/
    done

    # journald: the journal persistent, on /data (with
    # edgerec-journal-on-data.service), so the audit trail survives a
    # power-off.
    install -d ${D}${systemd_unitdir}/journald.conf.d
    for f in "$board"/journald.conf.d/*.conf; do
        [ -e "$f" ] || continue
        install -m 0644 "$f" ${D}${systemd_unitdir}/journald.conf.d/
    done

    install -D -m 0644 "$board/linuxptp/ptp4l.conf" ${D}${sysconfdir}/linuxptp/edgerec-ptp4l.conf

    # systemd-networkd's bring-up of the board's CAN interfaces (bitrate,
    # restart-ms, listen-only); boards without CAN have none.
    install -d ${D}${systemd_unitdir}/network
    for f in "$board"/network/*.network; do
        [ -e "$f" ] || continue
        install -m 0644 "$f" ${D}${systemd_unitdir}/network/
    done

    # net.core.rmem_max for the DDS, UDP and CAN receive buffers.
    install -d ${D}${sysconfdir}/sysctl.d
    for f in "$board"/sysctl.d/*.conf; do
        [ -e "$f" ] || continue
        install -m 0644 "$f" ${D}${sysconfdir}/sysctl.d/
    done

    # Shell completions and man pages, generated from the binary's command
    # line definition (crates/edgerec/share: edgerec completions SHELL and
    # edgerec man --dir, kept equal by crates/edgerec/tests/cli_docs.rs).
    # The man pages go to ${PN}-doc, as oe-core packages ${mandir}.
    share="${S}/crates/edgerec/share"
    install -D -m 0644 "$share/completions/edgerec.bash" ${D}${datadir}/bash-completion/completions/edgerec
    install -D -m 0644 "$share/completions/_edgerec" ${D}${datadir}/zsh/site-functions/_edgerec
    install -D -m 0644 "$share/completions/edgerec.fish" ${D}${datadir}/fish/vendor_completions.d/edgerec.fish
    install -d ${D}${mandir}/man1
    install -m 0644 "$share"/man/*.1 ${D}${mandir}/man1/

    # Mount point of the DATA partition (data.mount). The root file system
    # is read-only, so systemd could not create it at boot.
    install -d ${D}${EDGEREC_DATA_DIR}
}

EDGEREC_DATA_DIR = "/data"

PACKAGES =+ "${PN}-ptp ${PN}-jetson-clocks"

FILES:${PN}-ptp += "${sysconfdir}/linuxptp/edgerec-ptp4l.conf \
                    ${systemd_system_unitdir}/ptp4l-edgerec.service \
                    ${systemd_system_unitdir}/phc2sys-edgerec.service"
FILES:${PN}-jetson-clocks += "${systemd_system_unitdir}/jetson-clocks.service"
# ${datadir}/edgerec is in FILES:${PN} by default (${datadir}/${BPN}).
FILES:${PN} += "${nonarch_base_libdir}/udev/rules.d \
                ${nonarch_libdir}/sysusers.d \
                ${datadir}/bash-completion \
                ${datadir}/zsh \
                ${datadir}/fish \
                ${sysconfdir}/sysctl.d \
                ${systemd_unitdir}/network \
                ${systemd_unitdir}/journald.conf.d \
                ${systemd_system_unitdir} \
                ${EDGEREC_DATA_DIR}"
CONFFILES:${PN}-ptp = "${sysconfdir}/linuxptp/edgerec-ptp4l.conf"

# The recorder, its first-boot configuration seed, the data partition
# (data.mount pulls data-makefs.service, which makes the file system on
# first boot), the weekly TRIM of /data (edgerec-fstrim.timer starts
# edgerec-fstrim.service) and the journal on /data
# (edgerec-journal-on-data.service) are always enabled. ptp4l/phc2sys are enabled where the NIC
# has a PTP hardware clock (the Orin's), installed but disabled elsewhere.
# jetson_clocks is opt-in: EDGEREC_JETSON_CLOCKS = "1" (distro conf); the
# unit and its package exist on Jetson only.
SYSTEMD_PACKAGES = "${PN} ${PN}-ptp"
SYSTEMD_PACKAGES:append:tegra = " ${PN}-jetson-clocks"
SYSTEMD_SERVICE:${PN} = "edgerec.service edgerec-seed-config.service data.mount data-makefs.service edgerec-fstrim.timer edgerec-journal-on-data.service"
SYSTEMD_SERVICE:${PN}-ptp = "ptp4l-edgerec.service phc2sys-edgerec.service"
SYSTEMD_SERVICE:${PN}-jetson-clocks = "jetson-clocks.service"
SYSTEMD_AUTO_ENABLE:${PN} = "enable"
EDGEREC_PTP_AUTO_ENABLE ?= "disable"
EDGEREC_PTP_AUTO_ENABLE:tegra = "enable"
SYSTEMD_AUTO_ENABLE:${PN}-ptp = "${EDGEREC_PTP_AUTO_ENABLE}"
EDGEREC_JETSON_CLOCKS ??= "0"
SYSTEMD_AUTO_ENABLE:${PN}-jetson-clocks = "${@'enable' if d.getVar('EDGEREC_JETSON_CLOCKS') == '1' else 'disable'}"

# data-makefs.service probes DATA with wipefs and blkid before it runs
# mkfs.ext4 on a blank partition; systemd-fsck@ runs fsck.ext4 on it before
# data.mount; edgerec-fstrim.service runs fstrim.
#
# And the GStreamer elements every camera pipeline names
# (crates/camera/src/launch.rs), by the package oe-core's plugin split
# puts them in: queue (coreelements, in gstreamer1.0 itself),
# appsrc/appsink (base-app), videoconvert and videoscale (one plugin,
# videoconvertscale, since GStreamer 1.22), videorate, videotestsrc
# (source = "test"), h265parse (bad-videoparsersbad), and mp4mux
# (good-isomp4) for the MP4 export. The libraries come through shlibs.
# The encoder (and on Jetson nvvidconv and nvarguscamerasrc) is the
# machine's: packagegroup-edgerec-media.
RDEPENDS:${PN} = "\
    e2fsprogs-e2fsck \
    e2fsprogs-mke2fs \
    gstreamer1.0 \
    gstreamer1.0-plugins-bad-videoparsersbad \
    gstreamer1.0-plugins-base-app \
    gstreamer1.0-plugins-base-videoconvertscale \
    gstreamer1.0-plugins-base-videorate \
    gstreamer1.0-plugins-base-videotestsrc \
    gstreamer1.0-plugins-good-isomp4 \
    util-linux-blkid \
    util-linux-fstrim \
    util-linux-wipefs \
"
RDEPENDS:${PN}-ptp = "${PN} linuxptp"
RDEPENDS:${PN}-jetson-clocks = "${PN}"
RDEPENDS:${PN}-jetson-clocks:append:tegra = " tegra-tools-jetson-clocks"
# NVML for the GPU metrics; edgerec dlopens it and falls back to the Tegra
# sysfs when it is absent or answers NOT_SUPPORTED.
RRECOMMENDS:${PN}:append:tegra = " tegra-libraries-nvml"
# USB cameras: v4l2src, and jpegdec for MJPEG ones.
RRECOMMENDS:${PN} += "gstreamer1.0-plugins-good-jpeg gstreamer1.0-plugins-good-video4linux2"
