package awsexport

import (
	"io"
	"sync"
)

// A data file's bytes go from its encoder (gzip, on the export's
// goroutine) to the store's Put (on another) through a pipe. io.Pipe
// hands each Write over only once the reader has consumed it, so the
// encoder waited while the store wrote the file; this pipe copies writes
// into chunks that the reader drains while the encoder goes on, at most
// pipeChunks chunks of pipeChunkBytes ahead.
const (
	pipeChunkBytes = 256 << 10
	pipeChunks     = 4
)

type bufPipe struct {
	ch   chan []byte   // filled chunks, in order; closed by the writer
	free chan []byte   // drained chunks, for reuse
	gone chan struct{} // closed when the reader stops
	once sync.Once
	mu   sync.Mutex
	werr error // the writer's CloseWithError, for the reader
	rerr error // the reader's CloseWithError, for the writer

	cur    []byte // the writer's chunk being filled
	closed bool   // the writer ended the stream
	chunk  []byte // the reader's chunk
	rd     []byte // what is left of it to read
}

func newBufPipe() *bufPipe {
	return &bufPipe{ch: make(chan []byte, pipeChunks), free: make(chan []byte, pipeChunks+1), gone: make(chan struct{})}
}

// Write copies p into chunks, handing each full one to the reader.
func (p *bufPipe) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		if p.cur == nil {
			select {
			case p.cur = <-p.free:
				p.cur = p.cur[:0]
			default:
				p.cur = make([]byte, 0, pipeChunkBytes)
			}
		}
		c := copy(p.cur[len(p.cur):cap(p.cur)], b)
		p.cur = p.cur[:len(p.cur)+c]
		b, n = b[c:], n+c
		if len(p.cur) == cap(p.cur) {
			if err := p.send(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (p *bufPipe) send() error {
	select {
	case p.ch <- p.cur:
		p.cur = nil
		return nil
	case <-p.gone:
		return p.readerErr()
	}
}

func (p *bufPipe) readerErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr != nil {
		return p.rerr
	}
	return io.ErrClosedPipe
}

// Close hands the last chunk over and ends the stream (the reader sees
// io.EOF after it).
func (p *bufPipe) Close() error {
	if p.closed {
		return nil
	}
	var err error
	if len(p.cur) > 0 {
		err = p.send()
	}
	p.closed = true
	close(p.ch)
	return err
}

// CloseWithError ends the stream with err for the reader, dropping what
// it has not read.
func (p *bufPipe) CloseWithError(err error) {
	if p.closed {
		return
	}
	if err == nil {
		err = io.ErrClosedPipe
	}
	p.mu.Lock()
	p.werr = err
	p.mu.Unlock()
	p.closed = true
	close(p.ch)
}

// Read reads the chunks in order.
func (p *bufPipe) Read(b []byte) (int, error) {
	for len(p.rd) == 0 {
		c, ok := <-p.ch
		if !ok {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.werr != nil {
				return 0, p.werr
			}
			return 0, io.EOF
		}
		if p.chunk != nil {
			select {
			case p.free <- p.chunk:
			default:
			}
		}
		p.chunk, p.rd = c, c
	}
	n := copy(b, p.rd)
	p.rd = p.rd[n:]
	return n, nil
}

// CloseRead stops the reader: the writer's next hand-over fails with err
// (io.ErrClosedPipe when nil).
func (p *bufPipe) CloseRead(err error) {
	p.once.Do(func() {
		p.mu.Lock()
		p.rerr = err
		p.mu.Unlock()
		close(p.gone)
	})
}

var _ io.ReadWriteCloser = (*bufPipe)(nil)
