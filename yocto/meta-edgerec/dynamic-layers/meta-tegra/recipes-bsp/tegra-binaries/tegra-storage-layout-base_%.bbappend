# The NVMe (external) partition layout with a DATA partition for the
# recordings, used in place of L4T's flash_l4t_t234_nvme.xml with the
# edgerec distro.
#
# tegra-storage-layout-base installs PARTITION_FILE_EXTERNAL as
# ${datadir}/l4t-storage-layout/${PARTITION_LAYOUT_EXTERNAL}, which
# tegra-storage-layout turns into the tegraflash external-flash.xml. Our
# copy (in ${BPN}/ next to this append) is L4T R36's file with two
# changes: APP (the root file system, id 1 = nvme0n1p1) keeps its fixed
# ROOTFSPART_SIZE instead of growing, and DATA, the last partition before
# secondary_gpt, grows to fill the drive (allocation_attribute 0x808).
# The board's data-makefs.service makes its file system on first boot;
# data.mount mounts /dev/disk/by-partlabel/DATA at /data.

FILESEXTRAPATHS:prepend:edgerec := "${THISDIR}/${BPN}:"

SRC_URI:append:edgerec = " file://edgerec-flash_l4t_t234_nvme.xml"

PARTITION_FILE_EXTERNAL:edgerec:tegra234 = "${WORKDIR}/edgerec-flash_l4t_t234_nvme.xml"
