package oci_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
)

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
