package format

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func sha256Sum(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

func md5Sum(b []byte) []byte { s := md5.Sum(b); return s[:] }
