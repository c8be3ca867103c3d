package format

import (
	"crypto/md5"
	"crypto/sha256"
	"hash"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Compression settings of format v1. The encoder writes one frame per data
// file with the frame checksum on; the window is 4 MiB so that a reader's
// memory stays small; the reader refuses windows above 8 MiB.
const (
	encoderWindow    = 4 << 20
	decoderMaxWindow = 8 << 20
)

// NewEncoder returns a zstd encoder with the format's settings (exported
// for benchmarks and tools that want byte-identical compression).
func NewEncoder(w io.Writer) (*zstd.Encoder, error) {
	return zstd.NewWriter(w,
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithEncoderCRC(true),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(encoderWindow),
		zstd.WithZeroFrames(true),
	)
}

// NewDecoder returns a zstd decoder with the format's settings:
// synchronous (no goroutines), checksums verified, window bounded.
func NewDecoder(r io.Reader) (*zstd.Decoder, error) {
	return zstd.NewReader(r,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(decoderMaxWindow),
		zstd.WithDecoderLowmem(true),
	)
}

// hashWriter counts and hashes (sha256, md5) what passes to w.
type hashWriter struct {
	w      io.Writer
	n      int64
	sha    hash.Hash
	md5    hash.Hash
	failed error
}

func newHashWriter() *hashWriter { return &hashWriter{sha: sha256.New(), md5: md5.New()} }

func (h *hashWriter) reset(w io.Writer) {
	h.w, h.n, h.failed = w, 0, nil
	h.sha.Reset()
	h.md5.Reset()
}

func (h *hashWriter) Write(p []byte) (int, error) {
	if h.failed != nil {
		return 0, h.failed
	}
	n, err := h.w.Write(p)
	h.sha.Write(p[:n])
	h.md5.Write(p[:n])
	h.n += int64(n)
	if err != nil {
		h.failed = err
	}
	return n, err
}

// limitHashReader hashes what it reads and refuses a stream longer than
// limit at the first byte past it.
type limitHashReader struct {
	r       io.Reader
	key     string
	n       int64
	limit   int64
	sha     hash.Hash
	md5     hash.Hash
	tooLong error
	eof     bool

	// The hashes run on a second goroutine, fed copies of the compressed
	// chunks in order, so that sha256 and md5 overlap decompression; join
	// waits for them.
	hq    chan []byte
	hdone chan struct{}
}

func newLimitHashReader() *limitHashReader {
	return &limitHashReader{sha: sha256.New(), md5: md5.New()}
}

func (l *limitHashReader) reset(r io.Reader, key string, limit int64) {
	l.join()
	l.r, l.key, l.n, l.limit, l.tooLong, l.eof = r, key, 0, limit, nil, false
	l.sha.Reset()
	l.md5.Reset()
	l.hq, l.hdone = make(chan []byte, 16), make(chan struct{})
	go func(q <-chan []byte, done chan<- struct{}, sha, md hash.Hash) {
		for b := range q {
			sha.Write(b)
			md.Write(b)
			putHashBuf(b)
		}
		close(done)
	}(l.hq, l.hdone, l.sha, l.md5)
}

// hash hands a copy of p to the hashing goroutine.
func (l *limitHashReader) hash(p []byte) {
	if len(p) == 0 {
		return
	}
	b := getHashBuf(len(p))
	copy(b, p)
	l.hq <- b
}

// join waits until everything read so far is hashed.
func (l *limitHashReader) join() {
	if l.hq != nil {
		close(l.hq)
		<-l.hdone
		l.hq, l.hdone = nil, nil
	}
}

// sums returns the sha256 and md5 of the stream read so far.
func (l *limitHashReader) sums() (sha, md []byte) {
	l.join()
	return l.sha.Sum(nil), l.md5.Sum(nil)
}

const hashBufSize = 256 << 10

var hashBufs = sync.Pool{New: func() any { b := make([]byte, hashBufSize); return &b }}

func getHashBuf(n int) []byte {
	if n > hashBufSize {
		return make([]byte, n)
	}
	return (*hashBufs.Get().(*[]byte))[:n]
}

func putHashBuf(b []byte) {
	if cap(b) == hashBufSize {
		b = b[:hashBufSize]
		hashBufs.Put(&b)
	}
}

func (l *limitHashReader) Read(p []byte) (int, error) {
	if l.tooLong != nil {
		return 0, l.tooLong
	}
	if len(p) == 0 {
		return 0, nil
	}
	rem := l.limit - l.n
	if int64(len(p)) > rem+1 {
		p = p[:rem+1]
	}
	k, err := l.r.Read(p)
	if int64(k) > rem {
		l.hash(p[:rem])
		l.n = l.limit
		l.tooLong = fileErr(l.key, ErrCompressedSize, "stream is longer than the recorded %d bytes", l.limit)
		return 0, l.tooLong
	}
	l.hash(p[:k])
	l.n += int64(k)
	if err == io.EOF {
		l.eof = true
	}
	return k, err
}

// drain reads the rest of the stream (up to the limit and one byte past
// it), so that the hashes and the size cover the whole object.
func (l *limitHashReader) drain() error {
	if l.tooLong != nil || l.eof {
		return l.tooLong
	}
	var buf [32 << 10]byte
	for {
		_, err := l.Read(buf[:])
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
