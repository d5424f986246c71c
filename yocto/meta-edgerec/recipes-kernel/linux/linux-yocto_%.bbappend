# The drivers the emulated board's devices need, built in so that nothing
# must be loaded before /data mounts: the NVMe data disk and the i6300esb
# watchdog that conf/distro/include/edgerec-qemu.inc adds to runqemu's
# QEMU command line. That include sets EDGEREC_KERNEL_FRAGMENTS for
# qemuarm64 only; other machines (and other distros) get nothing.
FILESEXTRAPATHS:prepend:edgerec := "${THISDIR}/files:"

SRC_URI:append:edgerec = " ${EDGEREC_KERNEL_FRAGMENTS}"
