# Shared by the scripts that build from Argo Rollouts' Go module (build-argo-rollouts.sh,
# build-plugins.sh, build-argo-oracle.sh). The caller defines `log` and `die` and sets
# ARGO_VERSION before sourcing it.

ARGO_MODULE=github.com/argoproj/argo-rollouts

# Refuses to go on without the machine's own Go 1.25 or newer (never a toolchain download),
# and sets the build environment: static binaries, Argo's complete go.sum only filling the
# module cache. `what` says what needs it, for the message.
argo_require_go() { # what
  command -v go >/dev/null || die "Go is needed to build $1 (go 1.25 or newer on PATH)"
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
  local minor
  minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
  [[ $minor =~ ^[0-9]+$ && $minor -ge 25 ]] ||
    die "building $1 needs Go 1.25 or newer; $(command -v go) is $(go env GOVERSION)"
}

# Downloads Argo's module at ARGO_VERSION and copies it to `dest`, writable (the module cache
# is read-only, and only a build inside Argo's own module gets its `replace` directives).
# Sets ARGO_MODULE_JSON to `go mod download -json`'s answer (the release's commit is in it).
argo_module_copy() { # dest
  log "fetching $ARGO_MODULE v$ARGO_VERSION from the Go module proxy"
  # On failure the JSON carries the reason (an unknown version, a newer Go needed, no network).
  ARGO_MODULE_JSON=$(go mod download -json "$ARGO_MODULE@v$ARGO_VERSION") || {
    local reason
    reason=$(sed -nE '/^\s*"Error": /{s/^\s*"Error": "(.*)",?$/\1/; s/\\u003e/>/g; s/\\u003c/</g; p}' \
      <<<"$ARGO_MODULE_JSON")
    die "could not download $ARGO_MODULE v$ARGO_VERSION: ${reason:-see the output above}"
  }
  local dir
  dir=$(sed -nE 's/^\s*"Dir": "(.*)",?$/\1/p' <<<"$ARGO_MODULE_JSON")
  [[ -n $dir && -f $dir/go.mod ]] || die "could not download $ARGO_MODULE v$ARGO_VERSION"
  rm -rf "$1"
  cp -r "$dir" "$1"
  chmod -R u+w "$1"
}
