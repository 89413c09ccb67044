# ArchiveBot control node: a static binary on a distroless base, run as a
# non-root user, its embedded Redis's snapshot on the /data volume.
#
#   docker build -t archivebot .
#   docker run -d --name archivebot \
#     -v archivebot-data:/data \
#     -v $PWD/archivebot.toml:/etc/archivebot/archivebot.toml:ro \
#     -p 6379:6379 -p 4567:4567 -p 4568:4568 archivebot
#
# The configuration must set irc.server and irc.channels (without a
# server the console front end would read commands from a stdin that a
# detached container does not have), redis.password (the embedded Redis
# listens on every interface of the container, for the pipelines) and
# http.listen = "0.0.0.0:4567" to publish the web API (and
# http.stream_listen = "0.0.0.0:4568" for upstream's dashboard). REDIS_URL
# selects an external Redis instead. cmd/archivebot/deploy_test.go runs
# the binary with this file's ENV, CMD and HEALTHCHECK, and runs the
# build line below to check that `archivebot version` names the commit.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static: no cgo, so the binary runs on a base without a C library. The
# version and commit are stamped with -X from the .git the build context
# keeps (.dockerignore); without one they say "unknown".
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X main.stampVersion=$(git describe --tags --always --dirty 2>/dev/null || echo unknown) -X main.stampRevision=$(git rev-parse HEAD 2>/dev/null || echo unknown)" -o /out/archivebot ./cmd/archivebot \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/archivebot /usr/local/bin/archivebot
# The volume's mount point belongs to the image's non-root user, so a
# fresh named volume is writable by it.
COPY --from=build --chown=65532:65532 /out/data /data
ENV ARCHIVEBOT_DATA_DIR=/data \
    ARCHIVEBOT_REDIS_LISTEN=0.0.0.0:6379
VOLUME ["/data"]
EXPOSE 6379 4567 4568
USER 65532:65532
# No shell or curl in the base: the binary asks its node's /readyz (Redis
# answers, IRC connected, services running) on http.listen.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s \
  CMD ["/usr/local/bin/archivebot", "healthcheck", "-config", "/etc/archivebot/archivebot.toml"]
ENTRYPOINT ["/usr/local/bin/archivebot"]
CMD ["-config", "/etc/archivebot/archivebot.toml"]
