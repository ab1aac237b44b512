package timing

import (
	"sync"
	"testing"
	"time"
)

func TestDelayerOrderAndStop(t *testing.T) {
	d := NewDelayer()
	var mu sync.Mutex
	var got []int
	done := make(chan struct{})
	d.After(30*time.Millisecond, func() { mu.Lock(); got = append(got, 3); mu.Unlock(); close(done) })
	d.After(10*time.Millisecond, func() { mu.Lock(); got = append(got, 1); mu.Unlock() })
	d.After(0, func() { mu.Lock(); got = append(got, 0); mu.Unlock() })
	<-done
	d.After(time.Hour, func() { t.Error("ran after Stop") })
	d.Stop()
	d.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("order %v", got)
	}
}
