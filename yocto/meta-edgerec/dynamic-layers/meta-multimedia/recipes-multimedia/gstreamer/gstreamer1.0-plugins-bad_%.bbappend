# x265enc: the software H.265 encoder edgerec uses on machines without
# NVENC (packagegroup-edgerec-media installs gstreamer1.0-plugins-bad-x265
# there). It links x265 from meta-multimedia, whose LICENSE_FLAGS
# "commercial" the edgerec distro accepts for x265 only. The distro conf
# sets EDGEREC_GST_BAD_PACKAGECONFIG ("x265", empty on Jetson, which
# encodes with nvv4l2h265enc); other distros are left alone.
PACKAGECONFIG:append:edgerec = " ${EDGEREC_GST_BAD_PACKAGECONFIG}"
