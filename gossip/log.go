package gossip

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
)

// discardLogger is used when Config.Logger is nil.
var discardLogger = slog.New(slog.DiscardHandler)

// slogWriter adapts memberlist's *log.Logger output ("[WARN] memberlist: ...")
// to a *slog.Logger, mapping the bracketed level.
type slogWriter struct{ l *slog.Logger }

func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l}, "", 0)
}

func (w slogWriter) Write(p []byte) (int, error) {
	n := len(p)
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, lv := range []struct {
		tag string
		l   slog.Level
	}{{"[TRACE]", slog.LevelDebug - 4}, {"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo},
		{"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError}} {
		if bytes.HasPrefix(line, []byte(lv.tag)) {
			level = lv.l
			line = bytes.TrimSpace(line[len(lv.tag):])
			break
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		w.l.Log(ctx, level, string(line), "component", "memberlist")
	}
	return n, nil
}

var _ io.Writer = slogWriter{}
