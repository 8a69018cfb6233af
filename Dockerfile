# syntax=docker/dockerfile:1
# Multi-stage build: a static lockproxy binary in a distroless image that
# runs as a non-root user. Mount the config at /etc/lockproxy/rules.yaml:
#
#   docker build -t lockproxy .
#   docker run -v $PWD/rules.yaml:/etc/lockproxy/rules.yaml:ro -p 3307:3307 lockproxy
#
# Inside a container, listen on 0.0.0.0 (proxy.listen: 0.0.0.0:3307) or the
# port is unreachable from outside; the admin listener stays on loopback
# unless you set admin.listen too.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lockproxy ./cmd/lockproxy

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lockproxy /usr/local/bin/lockproxy
USER nonroot:nonroot
EXPOSE 3307 9307
ENTRYPOINT ["/usr/local/bin/lockproxy"]
CMD ["--config", "/etc/lockproxy/rules.yaml"]
