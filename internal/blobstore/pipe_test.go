package blobstore

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

// The upload buffer passes every byte in order whatever the write and
// read sizes, ends with io.EOF on Close and with the writer's error on
// CloseWithError.
func TestBufPipe(t *testing.T) {
	src := make([]byte, 3<<20+17)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for _, end := range []error{nil, errors.New("encoder failed")} {
		pr, pw := newBufPipe(64<<10, 3)
		got := make(chan []byte)
		var rerr error
		go func() {
			var out bytes.Buffer
			buf := make([]byte, 100<<10)
			for {
				n, err := pr.Read(buf[:1+r.IntN(len(buf)-1)])
				out.Write(buf[:n])
				if err != nil {
					rerr = err
					break
				}
			}
			got <- out.Bytes()
		}()
		w := rand.New(rand.NewPCG(3, 4))
		for rest := src; len(rest) > 0; {
			n := min(len(rest), 1+w.IntN(200<<10))
			if k, err := pw.Write(rest[:n]); err != nil || k != n {
				t.Fatalf("write: %d, %v", k, err)
			}
			rest = rest[n:]
		}
		if end == nil {
			if err := pw.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			// What was written before CloseWithError may or may not be
			// read; the error must arrive.
			pw.CloseWithError(end)
		}
		out := <-got
		if end == nil {
			if rerr != io.EOF || !bytes.Equal(out, src) {
				t.Fatalf("read %d bytes (equal %v), end %v", len(out), bytes.Equal(out, src), rerr)
			}
		} else if rerr != end {
			t.Fatalf("reader ended with %v, want %v", rerr, end)
		}
	}
}

// A reader that stops (the store failed) fails the writer's writes, which
// never block on a full buffer.
func TestBufPipeReaderClosed(t *testing.T) {
	pr, pw := newBufPipe(1024, 2)
	stop := errors.New("store failed")
	done := make(chan error)
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := pw.Write(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond) // the writer fills the buffer and blocks
	pr.CloseWithError(stop)
	select {
	case err := <-done:
		if err != stop {
			t.Fatalf("writer got %v, want %v", err, stop)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the writer stayed blocked after the reader closed")
	}
}
