# meta-ros is in the build: edgerec gets its ros2 cargo feature.
#
# The feature is reserved in crates/edgerec/Cargo.toml today (`ros2 = []`,
# the same binary); the ROS 2 issue fills it with r2r, whose build script
# runs bindgen over the rcl headers. bindgen loads libclang, which comes
# from meta-clang's clang-native (conf/layer.conf makes clang-layer a
# dependency whenever ros2-layer is present). The ROS 2 issue also adds
# the rcl/rmw DEPENDS that r2r links against.
EDGEREC_CARGO_FEATURES:append = " ros2"

DEPENDS += "clang-native"

export LIBCLANG_PATH = "${STAGING_LIBDIR_NATIVE}"
# bindgen parses the target's headers with the target's flags (the sysroot
# is in TOOLCHAIN_OPTIONS), not the build host's.
BINDGEN_EXTRA_CLANG_ARGS = "${HOST_CC_ARCH}${TOOLCHAIN_OPTIONS} --target=${TARGET_SYS}"
export BINDGEN_EXTRA_CLANG_ARGS
