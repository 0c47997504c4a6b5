package portblock

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func owner(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBlocksLieOutsideTheEphemeralRange: no port of any block is one the
// kernel would hand to a process binding port 0 or connecting out.
func TestBlocksLieOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	first, n := Region()
	if n < 64 {
		t.Fatalf("the region holds %d blocks; want at least 64 (ephemeral range %d–%d)", n, lo, hi)
	}
	last := first + n*Size - 1
	if first < 1024 || (last >= lo && first <= hi) {
		t.Fatalf("region %d–%d overlaps the ephemeral range %d–%d or the privileged ports", first, last, lo, hi)
	}
	b, err := Acquire(owner(t, "a"), nil, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	for _, p := range b.Ports() {
		if p < first || p > last || !b.Contains(p) {
			t.Errorf("port %d of block %d lies outside it or the region", p, b.Base)
		}
	}
}

// TestConcurrentOwnersNeverShareABlock: many owners acquiring at once get
// distinct blocks, and an owner asking again gets its own block back.
func TestConcurrentOwnersNeverShareABlock(t *testing.T) {
	const n = 40
	blocks := make([]*Block, n)
	owners := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		owners[i] = owner(t, "c"+strconv.Itoa(i))
		wg.Go(func() {
			b, err := Acquire(owners[i], nil, 6, nil)
			if err != nil {
				errs <- err
				return
			}
			blocks[i] = b
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int]int{}
	for i, b := range blocks {
		if j, ok := seen[b.Base]; ok {
			t.Errorf("owners %d and %d share block %d", i, j, b.Base)
		}
		seen[b.Base] = i
		again, err := Acquire(owners[i], nil, 6, nil)
		if err != nil || again != b {
			t.Errorf("owner %d asking again: %v, %v; want its block %d", i, again, err, b.Base)
		}
	}
	for _, b := range blocks {
		b.Release()
	}
}

// TestAnotherProcessCannotTakeAReservedBlock: a second process (this test
// binary again) trying to lock a block this process reserved is refused, and
// takes it once it is released.
func TestAnotherProcessCannotTakeAReservedBlock(t *testing.T) {
	if path := os.Getenv("PORTBLOCK_TRY_LOCK"); path != "" {
		_, ok, err := lockFile(path)
		if err != nil {
			os.Exit(2)
		}
		if !ok {
			os.Exit(1)
		}
		os.Exit(0)
	}
	b, err := Acquire(owner(t, "x"), nil, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	try := func() int {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAnotherProcessCannotTakeAReservedBlock$") //nolint:gosec // this test binary
		cmd.Env = append(os.Environ(), "PORTBLOCK_TRY_LOCK="+filepath.Join(Dir(), strconv.Itoa(b.Base)))
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if code := try(); code != 1 {
		t.Fatalf("another process locking block %d while it is reserved: exit %d, want 1 (refused)", b.Base, code)
	}
	b.Release()
	if code := try(); code != 0 {
		t.Fatalf("another process locking block %d once released: exit %d, want 0", b.Base, code)
	}
}

// TestHeldPortsCannotBeBoundUntilHanded: while this process holds the block,
// nobody binds its ports; Hand frees exactly the one the component binds.
func TestHeldPortsCannotBeBoundUntilHanded(t *testing.T) {
	b, err := Acquire(owner(t, "h"), nil, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	ports := b.Ports()
	for _, p := range ports {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			_ = l.Close()
			t.Fatalf("port %d of the reserved block could be bound by another", p)
		}
	}
	b.Hand(ports[0])
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
	if err != nil {
		t.Fatalf("the handed port %d: %v", ports[0], err)
	}
	_ = l.Close()
	if got := b.Ports(); len(got) != len(ports)-1 || got[0] == ports[0] {
		t.Errorf("ports after handing %d: %v", ports[0], got)
	}
}

// TestAnOwnerGetsItsBlockBack: a released block is taken again by its owner,
// by preference (its recorded ports) and by its name alone; while the owner
// runs (alive), another owner preferring the same block gets another.
func TestAnOwnerGetsItsBlockBack(t *testing.T) {
	a := owner(t, "a")
	b, err := Acquire(a, nil, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := b.Base
	b.Release()
	running := func(o string) bool { return o == a }
	other, err := Acquire(owner(t, "b"), []int{base + 3}, 6, running)
	if err != nil {
		t.Fatal(err)
	}
	if other.Base == base {
		t.Fatalf("another owner took block %d while its owner runs", base)
	}
	other.Release()
	again, err := Acquire(a, nil, 6, running)
	if err != nil {
		t.Fatal(err)
	}
	if again.Base != base {
		t.Errorf("the owner got block %d back by its name; want %d", again.Base, base)
	}
	again.Release()
	// Not running any more: the preferred block is free for another.
	third, err := Acquire(owner(t, "c"), []int{base}, 6, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	defer third.Release()
	if third.Base != base {
		t.Errorf("a block whose owner stopped: another preferring it got %d, want %d", third.Base, base)
	}
	content, _ := os.ReadFile(filepath.Join(Dir(), strconv.Itoa(base)))
	if !strings.HasPrefix(string(content), third.owner+"\n") {
		t.Errorf("lock file names %q, want the new owner %s", content, third.owner)
	}
}

// TestABusyBlockIsSkipped: a block where fewer than need ports can be bound
// (another program listens on them) is not taken.
func TestABusyBlockIsSkipped(t *testing.T) {
	a := owner(t, "busy")
	b, err := Acquire(a, nil, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := b.Base
	b.Release()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for p := base; p < base+Size-5; p++ {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			held = append(held, l)
		}
	}
	again, err := Acquire(a, []int{base}, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if again.Base == base {
		t.Errorf("took block %d with only 5 of its ports free", base)
	}
}

// TestSweepReleasesRemovedOwners: the block of an owner directory removed
// without Release is given up at the next Acquire.
func TestSweepReleasesRemovedOwners(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(gone, nil, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	c, err := Acquire(owner(t, "next"), nil, 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if Held(gone) != nil {
		t.Error("the removed owner's block is still held")
	}
	if len(b.Ports()) != 0 {
		t.Error("the removed owner's listeners are still open")
	}
}
