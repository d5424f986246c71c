SUMMARY = "edgerec appliance package groups"
DESCRIPTION = "packagegroup-edgerec: the recorder, its board files and time \
               sync; packagegroup-edgerec-tools: storage and network \
               diagnostics; packagegroup-edgerec-media: GStreamer with the \
               machine's H.265 encoder."
LICENSE = "MIT"

# The machine decides the encoder and the Jetson extras below.
PACKAGE_ARCH = "${MACHINE_ARCH}"

inherit packagegroup

PACKAGES = "${PN} ${PN}-tools ${PN}-media"

# The recorder with its board files, and ptp4l/phc2sys with edgerec's
# units for them (enabled only where EDGEREC_PTP_AUTO_ENABLE says so). On
# Jetson also jetson-clocks.service (enabled only with
# EDGEREC_JETSON_CLOCKS = "1") and nvpmodel, which applies
# NVPMODEL_CONFIG_DEFAULT (MAXN) at boot.
EDGEREC_MACHINE_EXTRAS = ""
EDGEREC_MACHINE_EXTRAS:tegra = "edgerec-jetson-clocks tegra-nvpmodel"
RDEPENDS:${PN} = "${EDGEREC_MACHINE_EXTRAS} edgerec edgerec-ptp linuxptp"

# ethtool for the NIC's PTP capabilities, fio to measure the drive
# (board/*/TUNING.md), nvme-cli for its log pages and power states.
RDEPENDS:${PN}-tools = "ethtool fio nvme-cli"

# H.265 encoding: NVENC through nvv4l2h265enc (fed NVMM buffers by
# nvvidconv) and the Argus camera source on Jetson; elsewhere the x265enc
# software encoder, which needs x265 from meta-multimedia (the append in
# dynamic-layers/meta-multimedia enables it in gstreamer1.0-plugins-bad),
# so it is left out without that layer. The elements every pipeline uses
# are the edgerec package's own RDEPENDS.
EDGEREC_HEVC = "${@bb.utils.contains('BBFILE_COLLECTIONS', 'multimedia-layer', 'gstreamer1.0-plugins-bad-x265', '', d)}"
EDGEREC_HEVC:tegra = "gstreamer1.0-plugins-nvarguscamerasrc gstreamer1.0-plugins-nvvidconv gstreamer1.0-plugins-nvvideo4linux2"
RDEPENDS:${PN}-media = "\
    ${EDGEREC_HEVC} \
    gstreamer1.0 \
    gstreamer1.0-plugins-bad-videoparsersbad \
    gstreamer1.0-plugins-base-app \
"
