package controlplane

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestComponentThatExitedEarlyIsStartedAgainOnce: kwok, started while the
// API server runs its post-start hooks, gave up waiting for it (on a very
// loaded machine); once the API server is ready it is started again, and
// runs. One that exited on a taken port is left to onFreshPort, which
// moves it.
func TestComponentThatExitedEarlyIsStartedAgainOnce(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// Exits at its first start with firstWords, runs at the second.
	fake := func(name, firstWords string) {
		marker := filepath.Join(dir, name+".started")
		script := "#!/bin/sh\nif [ ! -e " + marker + " ]; then : > " + marker + "; echo '" + firstWords + "'; exit 1; fi\nexec sleep 60\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil { //nolint:gosec // an executable fake
			t.Fatal(err)
		}
	}
	fake(string(Kwok), "Execute exit err=timed out waiting for the condition")
	fake(string(Scheduler), "listen tcp 127.0.0.1:1: bind: address already in use")
	c := &ControlPlane{
		opts:    Options{StopGracePeriod: time.Second},
		log:     slog.New(slog.NewTextHandler(t.Output(), nil)),
		binDir:  bin,
		dataDir: dir,
		procs:   map[Component]*process{},
		args:    map[Component][]string{},
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	comps := []Component{Kwok, Scheduler}
	first := map[Component]*process{}
	for _, comp := range comps {
		if err := c.startComponent(comp); err != nil {
			t.Fatal(err)
		}
		first[comp] = c.procs[comp]
		if !first[comp].wait(t.Context(), 10*time.Second) {
			t.Fatalf("%s's fake did not exit", comp)
		}
	}

	if err := c.startExitedAgain(t.Context(), comps); err != nil {
		t.Fatalf("start again: %v", err)
	}
	kwok := c.procs[Kwok]
	if kwok == first[Kwok] {
		t.Fatal("kwok, which exited, was not started again")
	}
	time.Sleep(200 * time.Millisecond)
	if exited, err := kwok.exited(); exited {
		t.Errorf("kwok started again exited: %v", err)
	}
	if c.procs[Scheduler] != first[Scheduler] {
		t.Error("the scheduler that could not bind its port was started again on it; onFreshPort moves it")
	}
}
