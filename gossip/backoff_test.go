package gossip

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// The join backoff runs on virtual time: every wait is checked exactly.
func TestRetryBackoffCappedExponential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var times []time.Time
		start := time.Now()
		err := retryBackoff(context.Background(), nil, 100*time.Millisecond, time.Second, halfJitter,
			func(n int) bool {
				times = append(times, time.Now())
				return n == 8
			})
		if err != nil {
			t.Fatal(err)
		}
		if len(times) != 8 || !times[0].Equal(start) {
			t.Fatalf("attempts %d, first at %v", len(times), times[0].Sub(start))
		}
		b := 100 * time.Millisecond
		for i := 1; i < len(times); i++ {
			gap := times[i].Sub(times[i-1])
			if gap < b/2 || gap > b {
				t.Errorf("wait %d = %v, want in [%v, %v]", i, gap, b/2, b)
			}
			b = min(2*b, time.Second)
		}
	})
}

func TestRetryBackoffStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		err := retryBackoff(ctx, nil, time.Second, 10*time.Second, func(b time.Duration) time.Duration { return b },
			func(int) bool { return false })
		if err != context.DeadlineExceeded || time.Since(start) != 3*time.Second {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
		stop := make(chan struct{})
		go func() { time.Sleep(1500 * time.Millisecond); close(stop) }()
		start = time.Now()
		err = retryBackoff(context.Background(), stop, time.Second, 10*time.Second, func(b time.Duration) time.Duration { return b },
			func(int) bool { return false })
		if err != ErrShutdown || time.Since(start) != 1500*time.Millisecond {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
	})
}
