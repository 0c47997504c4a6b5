// Package portblock gives each local cluster a block of loopback ports that no
// other process on the machine takes by chance.
//
// A port chosen by binding 127.0.0.1:0 and closing the listener is free for a
// moment only: the kernel hands the same ephemeral range to every process that
// binds port 0 and to every outgoing connection, so on a busy machine (other
// clusters, a test suite, a browser) another process can take the port before
// the component that was meant to bind it starts. Blocks avoid that in two ways:
//
//   - Blocks lie outside the kernel's ephemeral range
//     (/proc/sys/net/ipv4/ip_local_port_range), where the kernel never picks a
//     port by itself: only a process that names the port can take it.
//   - A block is reserved for one owner (a cluster's data directory). Its lock
//     file, one per block in a directory every kubeplug process on the machine
//     shares ([Dir]), names the owner. While a process chooses and starts a
//     cluster's components it holds an exclusive flock(2) on that file, so two
//     processes never take one block at once; once the components run, the
//     cluster is the block's owner for as long as its recorded processes live
//     (the caller's alive function tells), after the command that started them
//     has exited. A block whose owner no longer runs is free again, without a
//     record to clean: a crash, even by SIGKILL, leaks nothing.
//
// While this process holds a block, it also holds listeners on the block's free
// ports, so that even a process naming a port inside the block cannot take it;
// [Block.Hand] closes one right before the component that binds it starts.
//
// An owner asks for the block it had before first (the one its recorded ports
// lie in), then for the block its name hashes to, so a cluster started again
// gets the same ports whenever they are free: kubeconfigs and flags stay valid.
package portblock

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Size is the number of ports in a block: a control plane uses six (etcd's
// client and peer ports, the API server, the controller manager, the scheduler
// and kwok); the rest are spare, for a port another process holds all the same.
const Size = 16

// regionBlocks is how many blocks the region below the ephemeral range holds
// at most (768 blocks of 16: ports 20480–32767 on Linux' default range).
const regionBlocks = 768

// ErrNoBlock is returned when every block of the region is reserved or busy.
var ErrNoBlock = errors.New("no free block of loopback ports")

// Block is a reserved block of loopback ports: [Base, Base+Size).
type Block struct {
	Base  int
	owner string
	lock  *os.File
	// existed: owner was a directory when the block was acquired, so its
	// removal means the owner is gone (sweep).
	existed bool

	mu   sync.Mutex
	held map[int]net.Listener // the block's ports this process still holds
}

var (
	mu   sync.Mutex
	mine = map[string]*Block{} // owner -> the block this process holds for it
)

// Dir is the directory of the lock files, one per block, shared by every user's
// kubeplug on the machine (created mode 1777, like /tmp).
func Dir() string { return filepath.Join(os.TempDir(), "kubeplug-ports") }

// Region returns the first port of the region blocks are taken from and how
// many blocks it holds: the ports just below the kernel's ephemeral range, or
// just above it when there is no room below.
func Region() (first, blocks int) {
	lo, hi := ephemeralRange()
	below := (lo - 1024) / Size
	above := (65536 - (hi + 1)) / Size
	switch {
	case below >= 64 || below >= above:
		n := min(below, regionBlocks)
		return lo - n*Size, n
	default:
		return hi + 1, min(above, regionBlocks)
	}
}

// ephemeralRange reads the kernel's ephemeral port range; elsewhere than Linux
// it is IANA's 49152–65535.
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l > 0 && h >= l && h < 65536 {
				return l, h
			}
		}
	}
	return 49152, 65535
}

// Acquire reserves a block for owner, which names what the ports are for (a
// cluster's absolute data directory), and holds listeners on its free ports.
// A block this process already holds for owner is returned again. The blocks of
// the ports in prefer are tried first, then the block owner's name hashes to,
// then every other block in turn; a block is taken only if its lock is free and
// at least need of its ports can be bound now, and its lock file names no other
// owner that alive says still runs (alive may be nil: no owner runs on).
func Acquire(owner string, prefer []int, need int, alive func(owner string) bool) (*Block, error) {
	mu.Lock()
	defer mu.Unlock()
	if b := mine[owner]; b != nil {
		return b, nil
	}
	sweep()
	first, n := Region()
	if n == 0 {
		return nil, fmt.Errorf("%w: the kernel's ephemeral range leaves no room for one", ErrNoBlock)
	}
	if err := ensureDir(); err != nil {
		return nil, err
	}
	var order []int
	for _, p := range prefer {
		if p >= first && p < first+n*Size {
			order = append(order, (p-first)/Size)
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(owner))
	start := int(h.Sum32() % uint32(n)) //nolint:gosec // n is at most regionBlocks
	for i := range n {
		order = append(order, (start+i)%n)
	}
	tried := map[int]bool{}
	busy := 0
	for _, idx := range order {
		if tried[idx] {
			continue
		}
		tried[idx] = true
		b, err := tryBlock(first+idx*Size, owner, need, alive)
		if err != nil {
			return nil, err
		}
		if b == nil {
			busy++
			continue
		}
		if fi, err := os.Stat(owner); err == nil && fi.IsDir() {
			b.existed = true
		}
		mine[owner] = b
		return b, nil
	}
	return nil, fmt.Errorf("%w: all %d blocks of ports %d–%d are reserved (lock files in %s) or in use", ErrNoBlock, busy, first, first+n*Size-1, Dir())
}

// Held returns the block this process holds for owner, or nil.
func Held(owner string) *Block {
	mu.Lock()
	defer mu.Unlock()
	return mine[owner]
}

// sweep releases the blocks of owners that were directories and are no longer
// there (a test's temporary data directory removed without Release). An owner
// directory not made yet (a state directory before its first up) is kept.
func sweep() {
	for owner, b := range mine {
		if b.existed {
			if _, err := os.Stat(owner); errors.Is(err, os.ErrNotExist) {
				b.release()
				delete(mine, owner)
			}
		}
	}
}

func ensureDir() error {
	dir := Dir()
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create the port lock directory %s: %w", dir, err)
	}
	// Every user's kubeplug shares it, as /tmp: sticky and writable by all.
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil && !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("port lock directory %s: %w", dir, err)
	}
	return nil
}

// tryBlock reserves the block at base for owner when its lock is free and at
// least need of its ports can be bound, and no other owner that still runs
// has it; it returns nil, nil when not.
func tryBlock(base int, owner string, need int, alive func(string) bool) (*Block, error) {
	f, ok, err := lockFile(filepath.Join(Dir(), strconv.Itoa(base)))
	if err != nil || !ok {
		return nil, err
	}
	b := &Block{Base: base, owner: owner, lock: f, held: map[int]net.Listener{}}
	if prev := recordedOwner(f); prev != "" && prev != owner && alive != nil && alive(prev) {
		b.release()
		return nil, nil
	}
	for p := base; p < base+Size; p++ {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			b.held[p] = l
		}
	}
	if len(b.held) < need {
		b.release()
		return nil, nil
	}
	// Who holds it, for a person reading the lock directory.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(owner+"\n"), 0)
	}
	return b, nil
}

// Ports returns the block's ports this process holds listeners on, lowest
// first: those it can hand to a component.
func (b *Block) Ports() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for p := b.Base; p < b.Base+Size; p++ {
		if b.held[p] != nil {
			out = append(out, p)
		}
	}
	return out
}

// Contains says whether port p is one of the block's.
func (b *Block) Contains(p int) bool { return p >= b.Base && p < b.Base+Size }

// Hand closes this process' listener on port p, right before the component
// that binds it starts; a port not held is left alone.
func (b *Block) Hand(p int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.held[p]; l != nil {
		_ = l.Close()
		delete(b.held, p)
	}
}

// Release gives the block up in this process: its listeners and its lock file
// close. The lock file still names the owner, which keeps the block while alive
// says it runs.
func (b *Block) Release() {
	mu.Lock()
	defer mu.Unlock()
	if mine[b.owner] == b {
		delete(mine, b.owner)
	}
	b.release()
}

func (b *Block) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p, l := range b.held {
		_ = l.Close()
		delete(b.held, p)
	}
	if b.lock != nil {
		_ = b.lock.Close()
	}
}

// recordedOwner reads the owner a lock file names (bounded: an owner is a path).
func recordedOwner(f *os.File) string {
	buf := make([]byte, 4096)
	n, _ := f.ReadAt(buf, 0)
	owner, _, _ := strings.Cut(string(buf[:n]), "\n")
	return owner
}
