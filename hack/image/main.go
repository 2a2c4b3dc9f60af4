// Command image builds Joiner's multi-arch image into an OCI layout
// (make image): internal/image says how.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/joiner-autoscaler/joiner/internal/image"
)

func main() {
	out := flag.String("out", "bin/image", "directory of the OCI layout to write")
	version := flag.String("version", "dev", "the release the binary reports")
	flag.Parse()
	idx, err := image.Build(context.Background(), *out, image.Options{Root: ".", Version: *version})
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	digest, err := idx.Digest()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (index %s, linux/amd64 and linux/arm64)\n", *out, digest)
}
