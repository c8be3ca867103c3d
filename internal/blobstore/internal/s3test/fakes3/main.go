// Command fakes3 serves an in-memory S3 (gofakes3) on a loopback port for
// the wire suite's backup tests: `fakes3 -bucket NAME` prints its endpoint
// URL on the first line of stdout and serves until killed. Test-only.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	bucket := flag.String("bucket", "extenddb-wire", "bucket to create")
	flag.Parse()
	backend := s3mem.New()
	if err := backend.CreateBucket(*bucket); err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	os.Stdout.Sync()
	f := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	log.Fatal(http.Serve(ln, f.Server()))
}
