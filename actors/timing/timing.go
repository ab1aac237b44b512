// Package timing provides Delayer, a delayed-send queue run by one goroutine
// owned by the node: actors use it to emulate edge RTTs on loopback and to
// schedule their own ticks without blocking in Receive.
package timing

import (
	"container/heap"
	"sync"
	"time"
)

// Delayer calls functions after a delay, in due order, from one goroutine.
type Delayer struct {
	mu    sync.Mutex
	items itemHeap
	seq   uint64
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

type item struct {
	due time.Time
	seq uint64
	fn  func()
}

type itemHeap []item

// Len implements heap.Interface.
func (h itemHeap) Len() int { return len(h) }

// Less implements heap.Interface (due time, then insertion order).
func (h itemHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}

// Swap implements heap.Interface.
func (h itemHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

// Push implements heap.Interface.
func (h *itemHeap) Push(x any) { *h = append(*h, x.(item)) }

// Pop implements heap.Interface.
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = item{}
	*h = old[:len(old)-1]
	return it
}

// NewDelayer starts the delayer's goroutine; Stop ends it.
func NewDelayer() *Delayer {
	d := &Delayer{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go d.loop()
	return d
}

// After runs fn once d has elapsed (immediately in the delayer goroutine when
// d <= 0). After Stop, fn is never run. fn must not block.
func (d *Delayer) After(dur time.Duration, fn func()) {
	d.mu.Lock()
	d.seq++
	heap.Push(&d.items, item{due: time.Now().Add(dur), seq: d.seq, fn: fn})
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Stop ends the goroutine and drops pending calls; it is idempotent.
func (d *Delayer) Stop() {
	d.once.Do(func() { close(d.stop) })
	<-d.done
}

func (d *Delayer) loop() {
	defer close(d.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.mu.Lock()
		now := time.Now()
		var due []func()
		for d.items.Len() > 0 && !d.items[0].due.After(now) {
			due = append(due, heap.Pop(&d.items).(item).fn)
		}
		wait := time.Hour
		if d.items.Len() > 0 {
			wait = d.items[0].due.Sub(now)
		}
		d.mu.Unlock()
		for _, fn := range due {
			fn()
		}
		if len(due) > 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-d.stop:
			return
		case <-d.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}
