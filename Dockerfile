# mergegate in a small non-root image: a static binary on distroless.
#
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) -t mergegate .
#   docker run -d -p 8080:8080 -v mergegate:/data mergegate
#
# The database and the set-up page's credentials file live in /data (a
# volume). The public listener (:8080: /webhook, /healthz, the set-up page)
# is published; the admin listener stays on 127.0.0.1:8081 inside the
# container unless MERGEGATE_ADMIN_ADDR=0.0.0.0:8081 is set, which mergegate
# accepts only with MERGEGATE_ADMIN_TOKEN (at least 16 characters). Publish
# it then on the host's loopback only: -p 127.0.0.1:8081:8081.
# docs/docker.md says more.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# CGO_ENABLED=0: the SQLite driver is pure Go; the binary needs no libc.
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/mergegate ./cmd/mergegate \
 && mkdir /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mergegate /usr/local/bin/mergegate
COPY --from=build --chown=65532:65532 /out/data /data
ENV MERGEGATE_DB=/data/mergegate.db \
    MERGEGATE_ADDR=:8080 \
    MERGEGATE_ADMIN_ADDR=127.0.0.1:8081
VOLUME /data
EXPOSE 8080 8081
USER nonroot:nonroot
# distroless has no shell and no curl: the binary asks its own /healthz.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
  CMD ["/usr/local/bin/mergegate", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/mergegate"]
CMD ["serve"]
