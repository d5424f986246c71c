SUMMARY = "edgerec recorder appliance image"
DESCRIPTION = "systemd, a read-only root file system, the edgerec recorder \
               with its board files, PTP time sync, storage diagnostics and \
               GStreamer with the machine's H.265 encoder. Recordings go to \
               the DATA partition mounted at /data."
LICENSE = "MIT"

IMAGE_INSTALL = "\
    packagegroup-core-boot \
    packagegroup-edgerec \
    packagegroup-edgerec-tools \
    packagegroup-edgerec-media \
    ${CORE_IMAGE_EXTRA_INSTALL} \
"

# The recorder writes only to /data (its own partition) and /run; the root
# file system is mounted read-only, so a power cut cannot damage it.
IMAGE_FEATURES += "read-only-rootfs"

IMAGE_LINGUAS = ""

inherit core-image
