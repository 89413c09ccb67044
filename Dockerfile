# ArchiveBot control node: a static binary on a distroless base, run as a
# non-root user, its embedded Redis's snapshot on the /data volume.
#
#   docker build -t archivebot .
#   docker run -d --name archivebot \
#     -v archivebot-data:/data \
#     -v $PWD/archivebot.toml:/etc/archivebot/archivebot.toml:ro \
#     -p 6379:6379 -p 4567:4567 archivebot
#
# The configuration must set irc.server and irc.channels (without a
# server the console front end would read commands from a stdin that a
# detached container does not have), redis.password (the embedded Redis
# listens on every interface of the container, for the pipelines) and
# http.listen = "0.0.0.0:4567" to publish the web API. REDIS_URL selects
# an external Redis instead. cmd/archivebot/deploy_test.go runs the
# binary with this file's ENV and CMD.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# The patched miniredis that go.mod's replace directive names.
COPY third_party/ third_party/
RUN go mod download
COPY . .
# Static: no cgo, so the binary runs on a base without a C library.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/archivebot ./cmd/archivebot \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/archivebot /usr/local/bin/archivebot
# The volume's mount point belongs to the image's non-root user, so a
# fresh named volume is writable by it.
COPY --from=build --chown=65532:65532 /out/data /data
ENV ARCHIVEBOT_DATA_DIR=/data \
    ARCHIVEBOT_REDIS_LISTEN=0.0.0.0:6379
VOLUME ["/data"]
EXPOSE 6379 4567
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/archivebot"]
CMD ["-config", "/etc/archivebot/archivebot.toml"]
