package awsexport

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// TestBufPipe: what goes in comes out in order, whatever the write
// sizes; a reader that stops fails the writer with its error; a writer
// that aborts fails the reader with its.
func TestBufPipe(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5*pipeChunkBytes+12345)
	for i := range data {
		data[i] = byte(r.IntN(256))
	}
	p := newBufPipe()
	got := make(chan []byte)
	go func() {
		b, err := io.ReadAll(p)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1+r.IntN(3*pipeChunkBytes/2))
		if w, err := p.Write(rest[:n]); err != nil || w != n {
			t.Fatalf("write: %d, %v", w, err)
		}
		rest = rest[n:]
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("read %d bytes, not the %d written", len(b), len(data))
	}

	stop := errors.New("store failed")
	p = newBufPipe()
	p.CloseRead(stop)
	var err error
	for i := 0; i < pipeChunks+2 && err == nil; i++ {
		_, err = p.Write(make([]byte, pipeChunkBytes))
	}
	if !errors.Is(err, stop) {
		t.Fatalf("writer after the reader stopped: %v", err)
	}

	p = newBufPipe()
	p.Write([]byte("abc"))
	p.CloseWithError(stop)
	if _, err := io.ReadAll(p); !errors.Is(err, stop) {
		t.Fatalf("reader after the writer aborted: %v", err)
	}
}
