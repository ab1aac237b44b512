package leakcheck

import (
	"sync"
	"testing"
)

// leakyMarker names a function only the goroutines of this test run.
func leakyMarker(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	<-stop
}

func TestGoroutinesFindsAndIgnores(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go leakyMarker(stop, &wg)
	if got := Goroutines([]string{"leakyMarker"}, nil); len(got) != 1 {
		t.Fatalf("found %d goroutines running leakyMarker, want 1", len(got))
	}
	if got := Goroutines([]string{"leakyMarker"}, []string{"leakyMarker"}); len(got) != 0 {
		t.Fatalf("ignore list not applied: %d found", len(got))
	}
	close(stop)
	wg.Wait()
	Wait(t, []string{"leakyMarker"}, nil) // passes: the goroutine exited
}
