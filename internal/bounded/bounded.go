package bounded

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// Deadline bounds reading a source that is not a regular file (a FIFO, a device, a
// socket): input files are small, and something that needs longer than this to
// deliver a megabyte is not a file but a stream that may never end.
const Deadline = 5 * time.Second

// deadline is Deadline, shortened by tests.
var deadline = Deadline

// Errors that ReadFile wraps.
var (
	// ErrTooLarge: the file holds more than the limit.
	ErrTooLarge = errors.New("file too large")
	// ErrIsDir: the path is a directory.
	ErrIsDir = errors.New("is a directory")
	// ErrTimeout: a FIFO or device did not deliver its content within Deadline.
	ErrTimeout = errors.New("read timed out")
	// ErrNoData: a FIFO or device ended without delivering a byte — a FIFO
	// nobody writes to reads as end of file at once, which would otherwise
	// surface as a confusing "missing field" of an empty document.
	ErrNoData = errors.New("delivered no data")
)

// TooLargeError says a file is larger than a limit.
type TooLargeError struct {
	// Size is the file's size when it is known (a regular file), else 0.
	Size int64
	// Limit is the limit in bytes.
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size > 0 {
		return "file is " + Size(e.Size) + ", larger than the " + Size(e.Limit) + " limit"
	}
	return "file is larger than the " + Size(e.Limit) + " limit"
}

// Unwrap returns ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// ReadFile reads the file at path, refusing one that holds more than limit bytes
// and, for a FIFO or device, one that does not deliver within Deadline. Errors
// wrap fs.ErrNotExist for a missing file, ErrIsDir, ErrTooLarge or ErrTimeout;
// their text does not repeat the path (callers name the file their own way).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, unwrapPath(err)
	}
	if fi.IsDir() {
		return nil, ErrIsDir
	}
	if fi.Mode().IsRegular() {
		if fi.Size() > limit {
			return nil, &TooLargeError{Size: fi.Size(), Limit: limit}
		}
		return Read(f, limit)
	}
	return readWithDeadline(f, limit, fi.Mode())
}

// Read reads r to its end, refusing more than limit bytes: at most limit+1 bytes
// are ever read.
func Read(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return data, nil
}

// readWithDeadline reads a FIFO, device or socket. The poller honours the read
// deadline where it can; a source it cannot poll is abandoned after Deadline
// (its goroutine ends with the process), so no source can hang the caller.
func readWithDeadline(f *os.File, limit int64, mode fs.FileMode) ([]byte, error) {
	_ = f.SetReadDeadline(time.Now().Add(deadline))
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := Read(f, limit)
		done <- result{data, err}
	}()
	timeout := func() error {
		return fmt.Errorf("%w: a %s that delivered no end of file within %s", ErrTimeout, Kind(mode), deadline)
	}
	select {
	case r := <-done:
		if errors.Is(r.err, os.ErrDeadlineExceeded) {
			return nil, timeout()
		}
		if r.err == nil && len(r.data) == 0 {
			return nil, fmt.Errorf("%w: a %s that ended at once (nothing writing to it?)", ErrNoData, Kind(mode))
		}
		return r.data, r.err
	case <-time.After(deadline + time.Second):
		return nil, timeout()
	}
}

// Kind names the type of a file that is not regular, for messages: "FIFO",
// "character device", "device", "socket", or "special file (TYPE)".
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file (" + m.Type().String() + ")"
}

func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// Size renders a byte count for messages: "1 MiB", "64 KiB", "1.5 MiB (1572864
// bytes)", "512 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB (" + strconv.FormatInt(n, 10) + " bytes)"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// Limits of the small files of the distribution surfaces, shared so that every
// reader of one kind of file agrees.
const (
	// MaxKeySize bounds a PEM public or private key file.
	MaxKeySize = 64 << 10
	// MaxSignatureSize bounds a detached signature (a base64 line).
	MaxSignatureSize = 64 << 10
	// MaxPasswordSize bounds a password or token read from standard input.
	MaxPasswordSize = 64 << 10
)

// ErrNotRegular is wrapped by OpenFile for a FIFO, a device or a socket.
var ErrNotRegular = errors.New("not a regular file")

// ReadFileAs is [ReadFile] whose errors name what the file is and its path
// ("cannot read the public key k.pub: file is larger than the 64 KiB limit"),
// still wrapping fs.ErrNotExist, ErrIsDir, ErrTooLarge, ErrTimeout or ErrNoData.
func ReadFileAs(what, path string, limit int64) ([]byte, error) {
	data, err := ReadFile(path, limit)
	if err != nil {
		return nil, fmt.Errorf("cannot read the %s %s: %w", what, path, err)
	}
	return data, nil
}

// OpenFile opens a file that is to be streamed rather than read whole (an
// archive), without blocking, and refuses anything but a regular file: a FIFO
// or a device has no size to check and may never end, so it wraps
// ErrNotRegular ("is a FIFO, not a regular file"); a directory wraps ErrIsDir.
// The caller still bounds what it reads by the size returned.
func OpenFile(path string) (*os.File, fs.FileInfo, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, nil, unwrapPath(err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		_ = f.Close()
		return nil, nil, unwrapPath(err)
	case fi.IsDir():
		_ = f.Close()
		return nil, nil, ErrIsDir
	case !fi.Mode().IsRegular():
		_ = f.Close()
		return nil, nil, fmt.Errorf("%w: is a %s", ErrNotRegular, Kind(fi.Mode()))
	}
	return f, fi, nil
}

// ReadLine reads r up to its first newline (or end), refusing a line of more
// than limit bytes: a stream that never ends (standard input from /dev/zero)
// is ErrTooLarge after limit bytes, never an out-of-memory. The newline and a
// carriage return before it are dropped. Bytes past the line may be consumed.
func ReadLine(r io.Reader, limit int) ([]byte, error) {
	br := bufio.NewReaderSize(r, limit+1)
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(line) > limit+1 || (err != nil && len(line) > limit):
		return nil, &TooLargeError{Limit: int64(limit)}
	case err != nil && !errors.Is(err, io.EOF):
		return nil, unwrapPath(err)
	}
	return bytes.Clone(bytes.TrimRight(line, "\r\n")), nil
}
