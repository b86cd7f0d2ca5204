# Entry points for developers and CI. `make help` lists them.
SHELL := bash
.DEFAULT_GOAL := help
CARGO ?= cargo

.PHONY: help demo cluster-up cluster-down fake-kubelet argo-rollouts plugins image release argo-oracle test conformance sim bench soak bench-engine dashboard-ui

help: ## List the targets
	@grep -E '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  %-14s %s\n", $$1, $$2}'

demo: ## Run Sluice on the local control plane (or TARGET_KUBECONFIG=path) and watch a canary progress
	TARGET_KUBECONFIG="$(TARGET_KUBECONFIG)" scripts/demo.sh

cluster-up: ## Start the local control plane and fake kubelet (builds them the first time); idempotent
	scripts/cluster-up.sh

cluster-down: ## Stop the local control plane and remove its state in .dev/
	scripts/cluster-down.sh

manifests: ## Render manifests/install.yaml and manifests/namespace-install.yaml from their kustomizations
	$(CARGO) run -q -p sluice-testenv --bin sluice-render-manifests

fake-kubelet: ## Build the fake kubelet binary
	$(CARGO) build -p sluice-testenv --bin sluice-fake-kubelet

argo-rollouts: ## Build Argo Rollouts' own controller (ARGO_VERSION, default 1.9.1) for the round-trip tests; cached by version
	scripts/build-argo-rollouts.sh >/dev/null
	ARGO_VERSION=1.10.1 scripts/build-argo-rollouts.sh >/dev/null

plugins: ## Build the plugin bridge and Argo's sample plugins (ARGO_VERSION, default 1.9.1) for the plugin tests; cached
	scripts/build-plugins.sh >/dev/null

image: ## Build the controller's container image (release build) into podman from Debian's packages, no Docker daemon needed; prints its name
	scripts/build-image.sh

release: ## Write a release's artifacts (controller, plugin bridge and CLI binaries, image archive, packaged chart, install.yaml, namespace-install.yaml, SHA256SUMS) to target/release-artifacts/<version>
	scripts/release.sh

argo-oracle: ## Build the conformance oracle (Argo's own functions) at Argo 1.9.1 and 1.10.1; cached
	ARGO_VERSION=1.9.1 scripts/build-argo-oracle.sh >/dev/null
	ARGO_VERSION=1.10.1 scripts/build-argo-oracle.sh >/dev/null

# A million generated cases in all: eighteen comparisons with Argo's code, 56,000 cases each.
CONFORMANCE_CASES ?= 56000
LIVE_SCENARIOS ?= 200
LIVE_START ?= 100
conformance: argo-oracle ## Compare Sluice with Argo's own code on a million generated cases (CONFORMANCE_CASES per comparison; SLUICE_CONFORMANCE_SEED=n replays one), then LIVE_SCENARIOS (200) live scenarios under both controllers
	SLUICE_CONFORMANCE_CASES=$(CONFORMANCE_CASES) $(CARGO) test --release -p sluice-conformance -- --nocapture --test-threads 1
	$(CARGO) build -p sluice-testenv --bin sluice-fake-kubelet
	scripts/build-argo-rollouts.sh >/dev/null
	ARGO_VERSION=1.10.1 scripts/build-argo-rollouts.sh >/dev/null
	$(call with_cluster,$(CARGO) run -q -p sluice-e2e --bin sluice-live-conformance -- --start $(LIVE_START) --scenarios $(LIVE_SCENARIOS))

# The control plane is stopped afterwards if the target started it (KEEP_CLUSTER=1 keeps it).
define with_cluster
	@if ! scripts/cluster-up.sh --check && [ -z "$(KEEP_CLUSTER)" ]; then \
		trap 'scripts/cluster-down.sh' EXIT; trap 'exit 130' INT TERM; \
	fi; \
	scripts/cluster-up.sh && $(1)
endef

dashboard-ui: ## Build the dashboard page into crates/cli/dashboard-ui/dist (type check, bundle, size budget); commit dist/ with its sources
	cd crates/cli/dashboard-ui && npm ci && npm run build

TESTS ?=
TEST_JOBS ?=
test: ## Format check, clippy, then every test binary against the local control plane, several at a time (TEST_JOBS=n; TESTS="canary analysis" for some; stopped again if this started it; KEEP_CLUSTER=1 keeps it)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) build -p sluice-testenv --bin sluice-fake-kubelet --bin sluice-test-runner
	scripts/build-argo-rollouts.sh >/dev/null
	ARGO_VERSION=1.10.1 scripts/build-argo-rollouts.sh >/dev/null
	scripts/build-plugins.sh >/dev/null
	ARGO_VERSION=1.9.1 scripts/build-argo-oracle.sh >/dev/null
	ARGO_VERSION=1.10.1 scripts/build-argo-oracle.sh >/dev/null
	scripts/install-moto.sh >/dev/null
	scripts/build-nats-server.sh >/dev/null
	scripts/install-test-tools.sh
	$(call with_cluster,"$${CARGO_TARGET_DIR:-target}/debug/sluice-test-runner" --cargo-arg=--workspace $(if $(TEST_JOBS),--jobs $(TEST_JOBS)) $(TESTS))

N ?= 1000
SCENARIOS ?= plain,steps,blue-green
CONTROLLERS ?= sluice,argo

bench: ## Cluster benchmark: N Rollouts (default 1000) per scenario under Sluice and under Argo 1.9.1's controller (CONTROLLERS=sluice for Sluice alone), against N Deployments, and the CLI timed against them; results in target/bench
	$(CARGO) build --release -p sluice-controller -p sluice-bench -p kubectl-sluice
	$(CARGO) build -p sluice-testenv --bin sluice-fake-kubelet
	$(if $(findstring argo,$(CONTROLLERS)),scripts/build-argo-rollouts.sh >/dev/null)
	$(call with_cluster,$(CARGO) run --release -q -p sluice-bench -- -n $(N) --scenarios $(SCENARIOS) --controllers $(CONTROLLERS))

SOAK ?= 60m
SOAK_FLAGS ?=
soak: ## Soak: N Rollouts changing images for SOAK (default 60m), controller RSS sampled every minute; SOAK_FLAGS="--dashboard --soak-rest 30s --soak-warm-up 10" adds the dashboard with three browser tabs, opened once ten rounds have filled the ReplicaSet history
	$(CARGO) build --release -p sluice-controller -p sluice-bench -p kubectl-sluice
	$(CARGO) build -p sluice-testenv --bin sluice-fake-kubelet
	$(call with_cluster,$(CARGO) run --release -q -p sluice-bench -- -n $(N) --soak $(SOAK) $(SOAK_FLAGS))

bench-engine: ## Criterion benchmarks of the pure engine: plans per second for typical Rollouts (report in target/criterion)
	$(CARGO) bench -p sluice-engine --bench reconcile

SEEDS ?= 1000
START ?= 0
JOBS ?=
sim: ## Long deterministic simulation: SEEDS seeds of every scenario from START on every core (JOBS=n for fewer), progress and time left every 10 s (release build)
	$(CARGO) run --release -q -p sluice-sim -- --seeds $(SEEDS) --start $(START) $(if $(JOBS),--jobs $(JOBS))
