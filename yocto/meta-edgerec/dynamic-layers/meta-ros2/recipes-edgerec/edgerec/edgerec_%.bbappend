# meta-ros is in the build: edgerec gets its ros2 cargo feature.
#
# The feature is reserved in crates/edgerec/Cargo.toml today (`ros2 = []`,
# the same binary); it is to switch on edgerec-ros's r2r backend, whose
# build script runs bindgen over the rcl headers (libclang, DEPENDS and the
# bindgen flags come from the base recipe, which needs them for cyclors
# already). Wiring it also adds the rcl/rmw DEPENDS that r2r links against.
EDGEREC_CARGO_FEATURES:append = " ros2"
