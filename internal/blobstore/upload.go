package blobstore

import (
	"context"
	"errors"
	"io"
	"sync"
)

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// drainCheck reports an error when the pipe still has bytes after a Put
// said it was done (which would mean the object is short).
func drainCheck(pr *bufPipeReader) error {
	var b [1]byte
	n, err := pr.Read(b[:])
	if n > 0 {
		return errors.New("blobstore: the store stopped reading an object before its end")
	}
	if err != nil && err != io.EOF {
		return err
	}
	return nil
}

// Upload is an object being written into a store: its bytes stream into
// the store's Put, through a buffer of uploadDepth chunks of uploadChunk
// bytes, while the writer goes on (compressing, say); Close publishes it
// (Put's atomicity) and answers Put's error, CloseWithError abandons it.
type Upload struct {
	pw   *bufPipeWriter
	done chan error
}

// NewUpload starts Put(ctx, key) in st, reading what is written to the
// Upload.
func NewUpload(ctx context.Context, st Store, key string) *Upload {
	pr, pw := newBufPipe(uploadChunk, uploadDepth)
	o := &Upload{pw: pw, done: make(chan error, 1)}
	go func() {
		err := st.Put(ctx, key, pr)
		if err == nil {
			// A Put that returns before reading everything must not
			// leave the writer blocked.
			err = drainCheck(pr)
		}
		pr.CloseWithError(errOr(err, io.ErrClosedPipe))
		o.done <- err
	}()
	return o
}

// Write buffers p for the upload; it fails once Put has stopped.
func (o *Upload) Write(p []byte) (int, error) { return o.pw.Write(p) }

// Close ends the object and waits for Put: its error, or nil once the
// object is stored.
func (o *Upload) Close() error {
	o.pw.Close()
	err := <-o.done
	o.pw.p.recycle()
	return err
}

// CloseWithError abandons the object: Put reads err and stores nothing.
func (o *Upload) CloseWithError(err error) error {
	o.pw.CloseWithError(err)
	<-o.done
	o.pw.p.recycle()
	return nil
}

// uploadChunk and uploadDepth size the buffer between the encoder and an
// upload: the encoder goes on compressing while the store writes up to
// uploadDepth chunks behind it.
const (
	uploadChunk = 256 << 10
	uploadDepth = 8
)

// chunkPool keeps upload chunks (cap uploadChunk) between the objects of
// a job and between jobs: a backup of a million items writes about twenty
// data files, and a megabyte or two of fresh chunks per file was most of
// what the job left to the garbage collector.
var chunkPool sync.Pool // of *[]byte

func getChunk(size int) []byte {
	if size == uploadChunk {
		if c, ok := chunkPool.Get().(*[]byte); ok {
			return (*c)[:0]
		}
	}
	return make([]byte, 0, size)
}

func putChunk(c []byte) {
	if cap(c) == uploadChunk {
		c = c[:0]
		chunkPool.Put(&c)
	}
}

// bufPipe is io.Pipe with a bounded buffer: writes are copied into chunks
// that the reader takes in order, so the writer blocks only when depth
// chunks wait. Closing the writer ends the stream after the buffered
// chunks (with io.EOF, or the CloseWithError error at once); closing the
// reader fails the writer's next write.
type bufPipe struct {
	chunks chan []byte
	free   chan []byte
	size   int

	once    sync.Once
	done    chan struct{} // closed by the reader side
	rerr    error         // why the reader closed (set before done)
	wonce   sync.Once
	werr    error // the writer's close error (nil: EOF), set before chunks closes
	wclosed chan struct{}
}

type bufPipeWriter struct {
	p   *bufPipe
	cur []byte
}

type bufPipeReader struct {
	p     *bufPipe
	cur   []byte // the unread rest of whole
	whole []byte
}

func newBufPipe(size, depth int) (*bufPipeReader, *bufPipeWriter) {
	p := &bufPipe{chunks: make(chan []byte, depth), free: make(chan []byte, depth+2), size: size,
		done: make(chan struct{}), wclosed: make(chan struct{})}
	return &bufPipeReader{p: p}, &bufPipeWriter{p: p}
}

func (w *bufPipeWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		if w.cur == nil {
			select {
			case c := <-w.p.free:
				w.cur = c[:0]
			default:
				w.cur = getChunk(w.p.size)
			}
		}
		k := copy(w.cur[len(w.cur):cap(w.cur)], b)
		w.cur = w.cur[:len(w.cur)+k]
		b = b[k:]
		n += k
		if len(w.cur) == cap(w.cur) {
			if err := w.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (w *bufPipeWriter) flush() error {
	select {
	case <-w.p.done:
		return w.p.rerr
	default:
	}
	select {
	case w.p.chunks <- w.cur:
		w.cur = nil
		return nil
	case <-w.p.done:
		return w.p.rerr
	}
}

// Close flushes what is buffered and ends the stream with io.EOF.
func (w *bufPipeWriter) Close() error {
	var err error
	if len(w.cur) > 0 {
		err = w.flush()
	}
	w.CloseWithError(nil)
	return err
}

// CloseWithError ends the stream: the reader gets err (io.EOF when nil)
// once it has read the chunks already sent.
func (w *bufPipeWriter) CloseWithError(err error) error {
	w.p.wonce.Do(func() {
		w.p.werr = err
		close(w.p.chunks)
	})
	return nil
}

func (r *bufPipeReader) Read(b []byte) (int, error) {
	for len(r.cur) == 0 {
		select {
		case <-r.p.done:
			return 0, io.ErrClosedPipe
		default:
		}
		c, ok := <-r.p.chunks
		if !ok {
			if r.p.werr != nil {
				return 0, r.p.werr
			}
			return 0, io.EOF
		}
		r.cur, r.whole = c, c
	}
	n := copy(b, r.cur)
	r.cur = r.cur[n:]
	if len(r.cur) == 0 {
		// Hand the chunk back to the writer for reuse.
		select {
		case r.p.free <- r.whole[:0]:
		default:
		}
		r.cur, r.whole = nil, nil
	}
	return n, nil
}

// recycle hands the chunks the reader gave back to chunkPool; only once
// both sides are done with the pipe (the upload has returned).
func (p *bufPipe) recycle() {
	for {
		select {
		case c := <-p.free:
			putChunk(c)
		default:
			return
		}
	}
}

// CloseWithError closes the reader side: the writer's pending and next
// writes fail with err.
func (r *bufPipeReader) CloseWithError(err error) error {
	r.p.once.Do(func() {
		r.p.rerr = errOr(err, io.ErrClosedPipe)
		close(r.p.done)
	})
	return nil
}
