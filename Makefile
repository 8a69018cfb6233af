# lockproxy. `make test` is the test command (CI runs it through .ci/run).
GO            ?= go
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m
# bench/ is a module of its own (its charting libraries stay out of
# lockproxy's), joined to the product's by go.work: named on its own.
PKGS          ?= ./... ./bench/...
ARGS          ?=
BENCH_ARGS    ?=
# Go modules of their own inside the repository (documentation tools);
# `./...` does not reach them, so vet and lint visit each (outside go.work).
SUBMODULES    := docs/tools/waitplot

.PHONY: all build image image-test test test-busy test-faults run demo down status bench bench-quick soak hostile fmt vet lint check-config clean

all: build

## build: compile bin/lockproxy
build:
	$(GO) build -o bin/lockproxy ./cmd/lockproxy

# The container image of `make image`: its name in the archive, the
# version lockproxy reports; its time stamps are the last commit's.
IMAGE         ?= lockproxy:latest
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

## image: the container image without a registry or a Docker engine: a
## static lockproxy, the nonroot user and the host's CA certificates in
## bin/lockproxy-image.tar, for `podman load` or `docker load`
## (docs/deploy/container.md)
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/image/lockproxy ./cmd/lockproxy
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
		$(GO) run ./internal/ociimage -binary bin/image/lockproxy -tag $(IMAGE) -version $(VERSION) -o bin/lockproxy-image.tar

## image-test: make image, then run it with podman against a test bed
## (e2e TestImage): a client through it, the admin port, the Kubernetes
## preStop hook and the drain. Installs podman and runc if missing; about
## two minutes; make test runs the same test on an image it builds itself
image-test: image
	scripts/testbed.sh install-podman
	LOCKPROXY_IMAGE=$(CURDIR)/bin/lockproxy-image.tar scripts/test.sh -race -count=1 -timeout 15m -v -run '^TestImage$$' ./e2e/

## test: start one test bed (MariaDB primary + replica, Redis), run every
## Go test against it with the race detector, take the bed down
test:
	scripts/test.sh $(GO_TEST_FLAGS) $(PKGS)

## test-busy: make test with two CPU-bound processes beside it (a busy
## 2-core machine); the suite must pass so too
test-busy:
	scripts/busy.sh 2 scripts/test.sh $(GO_TEST_FLAGS) $(PKGS)

## test-faults: the fault harness (e2e TestFault*) with the long workload:
## Redis, a proxy, the primary and the replica fail under a flash sale
test-faults:
	LOCKPROXY_FAULTS_LONG=1 $(GO) test -race -count=1 -timeout 40m -v -run 'TestFault' ./e2e/

## run: the demo: a persistent bed in .testbed/, the shop schema, lockproxy on 127.0.0.1:3307
run: build
	scripts/run.sh $(ARGS)

## demo: the flash sale of the seeds directly and through two lockproxy
## instances, side by side, on the bed of `make run` (started if need be)
demo: build
	$(GO) run ./bench/cmd/demo -lockproxy bin/lockproxy $(ARGS)

## down: stop the persistent bed of `make run` (its data stays in .testbed/)
down:
	scripts/testbed.sh down .testbed

## status: show the persistent bed of `make run`
status:
	scripts/testbed.sh status .testbed

## bench: the full benchmark suite (see bench/)
bench:
	$(GO) run ./bench/cmd/bench $(BENCH_ARGS)

## bench-quick: a short benchmark run
bench-quick:
	$(GO) run ./bench/cmd/bench -quick $(BENCH_ARGS)

## soak: 30 minutes of mixed load through two instances; fails on growth of
## goroutines, fds or memory, or on lost updates (see bench/SOAK.md)
soak:
	$(GO) run ./bench/cmd/soak

## hostile: every known attack on one lockproxy at once for 10 minutes while
## a flash sale runs through it; fails on RSS over its bound, a panic, an
## oversold item or lost update, a failed legitimate login, or a leaked
## statement (HOSTILE_ARGS="-duration 1m" for a short try)
HOSTILE_ARGS ?=
hostile:
	$(GO) run ./bench/cmd/hostile $(HOSTILE_ARGS)

## check-config: validate rules.yaml (needs the bed's variables, as in make run)
check-config: build
	set -a; . .testbed/env; set +a; bin/lockproxy --check --config rules.yaml

fmt:
	gofmt -w .

vet:
	$(GO) vet $(PKGS)
	for m in $(SUBMODULES); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done

## lint: fail on unformatted files, go vet, staticcheck (pinned; dead
## code, misuse, simplifications), and doc comments that do not start
## with the name they document (internal/doccheck)
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	for m in $(SUBMODULES); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done
	$(GO) run $(STATICCHECK) $(PKGS)
	for m in $(SUBMODULES); do (cd $$m && GOWORK=off $(GO) run $(STATICCHECK) ./...) || exit 1; done
	$(GO) run ./internal/doccheck .

clean:
	rm -rf bin
