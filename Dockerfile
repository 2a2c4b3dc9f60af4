# Joiner's image for those who build with Docker; make image builds the
# same image (internal/image) with no daemon. Static, non-root, the binary
# alone: its root certificates are compiled in.
#   docker buildx build --platform linux/amd64,linux/arm64 -t joiner:dev .
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/joiner ./cmd/joiner

FROM scratch
COPY --from=build /out/joiner /joiner
USER 65532:65532
ENTRYPOINT ["/joiner"]
