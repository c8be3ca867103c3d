package blobstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The filesystem store's Put and Get of 64 MiB objects beside plain file
// I/O of the same bytes in the same run:
//
//	go test -run '^$' -bench 64MiB -benchtime 3x ./internal/blobstore/
const benchSize = 64 << 20

func benchData(b *testing.B) []byte {
	data := make([]byte, benchSize)
	rand.Read(data)
	return data
}

func BenchmarkFSPut64MiB(b *testing.B) {
	data := benchData(b)
	s, err := NewFS(filepath.Join(b.TempDir(), "store"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.SetBytes(benchSize)
	b.ResetTimer()
	for b.Loop() {
		if err := s.Put(ctx, "acct/table/backup/data/000001.json.zst", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFSGet64MiB(b *testing.B) {
	data := benchData(b)
	s, err := NewFS(filepath.Join(b.TempDir(), "store"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "k/obj", bytes.NewReader(data)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSize)
	b.ResetTimer()
	for b.Loop() {
		rc, err := s.Get(ctx, "k/obj")
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, rc); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
		rc.Close()
	}
}

// BenchmarkPlainWrite64MiB: create, write, fsync, close — the floor for Put.
func BenchmarkPlainWrite64MiB(b *testing.B) {
	data := benchData(b)
	dir := b.TempDir()
	b.SetBytes(benchSize)
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Create(filepath.Join(dir, "plain"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkPlainCopy64MiB: io.Copy of a file into a new file (the kernel's
// copy_file_range where available) plus fsync.
func BenchmarkPlainCopy64MiB(b *testing.B) {
	data := benchData(b)
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSize)
	b.ResetTimer()
	for b.Loop() {
		in, _ := os.Open(src)
		out, err := os.Create(filepath.Join(dir, "dst"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			b.Fatal(err)
		}
		out.Sync()
		out.Close()
		in.Close()
	}
}

// BenchmarkPlainRead64MiB: read a file to the end — the floor for Get.
func BenchmarkPlainRead64MiB(b *testing.B) {
	data := benchData(b)
	src := filepath.Join(b.TempDir(), "src")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSize)
	b.ResetTimer()
	for b.Loop() {
		f, _ := os.Open(src)
		if n, err := io.Copy(io.Discard, f); err != nil || n != benchSize {
			b.Fatal(n, err)
		}
		f.Close()
	}
}
