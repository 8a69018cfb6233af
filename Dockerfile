# syntax=docker/dockerfile:1
# Multi-stage build: a static lockproxy binary in a distroless image that
# runs as a non-root user. Mount the config at /etc/lockproxy/rules.yaml:
#
#   docker build -t lockproxy .
#   docker run -v $PWD/rules.yaml:/etc/lockproxy/rules.yaml:ro -p 3307:3307 lockproxy
#
# The base images are build arguments, for a mirror or a registry of your
# own (any Go 1.26 image with the Go toolchain; any runtime image, even
# scratch: the CA certificates come from the build stage, the user is a
# number):
#
#   docker build --build-arg BUILDER_IMAGE=mirror.example/golang:1.26-bookworm \
#                --build-arg RUNTIME_IMAGE=mirror.example/distroless/static-debian12:nonroot .
#
# Without any registry, `make image` assembles the same image from a local
# build (docs/deploy/container.md).
#
# Inside a container, listen on 0.0.0.0 (proxy.listen: 0.0.0.0:3307) or the
# port is unreachable from outside; the admin listener stays on loopback
# unless you set admin.listen too.
ARG BUILDER_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
# The product's module alone: go.work also joins bench/'s, which the
# binary does not need.
ENV GOWORK=off
COPY go.mod go.sum ./
# A patched dependency go.mod replaces with a directory of the repository.
COPY third_party ./third_party
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lockproxy ./cmd/lockproxy

FROM ${RUNTIME_IMAGE}
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/lockproxy /usr/local/bin/lockproxy
# distroless's nonroot user, by number so that a runtime image without
# /etc/passwd works too.
USER 65532:65532
EXPOSE 3307 9307
ENTRYPOINT ["/usr/local/bin/lockproxy"]
CMD ["--config", "/etc/lockproxy/rules.yaml"]
