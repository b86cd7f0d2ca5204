# Shared by the scripts that build the workspace's binaries (cluster-up.sh, build-image.sh,
# release.sh). Sourced, not run.
#
# A script started from a test inherits the variables cargo set for the test's package
# (CARGO_MANIFEST_DIR, CARGO_PKG_NAME, ...). ring's build script watches several of them: a
# cargo given them would find them changed since the last plain build, run it again, rebuild
# ring and everything above it (rustls, the kube client, every workspace crate on them), and
# the next plain build would rebuild them back. The same rule as sluice_testenv::cargo.
workspace_cargo() {
  local drop=() var
  for var in $(compgen -e); do
    case $var in
      CARGO | CARGO_PKG_* | CARGO_MANIFEST_DIR | CARGO_MANIFEST_PATH | CARGO_MANIFEST_LINKS | \
        CARGO_CRATE_NAME | CARGO_BIN_NAME | CARGO_PRIMARY_PACKAGE | OUT_DIR)
        drop+=(-u "$var")
        ;;
    esac
  done
  env "${drop[@]}" cargo "$@"
}
