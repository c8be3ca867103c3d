package admincli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/extenddb/extenddb/internal/backup"
)

// newSyncProgress shows a sync's progress on w: a progress bar
// (schollz/progressbar) when w is a terminal, else plain lines (a line per
// phase start, at most one a second while it runs, and one at its end).
func newSyncProgress(w io.Writer) backup.SyncProgress {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &barProgress{w: w}
	}
	return &lineProgress{w: w, every: time.Second}
}

type barProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (p *barProgress) Start(phase string, total int) {
	p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(phase),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetElapsedTime(true), progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }))
}

func (p *barProgress) Add(n int) {
	if p.bar != nil {
		p.bar.Add(n)
	}
}

func (p *barProgress) Finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}

// lineProgress writes plain lines, for logs and pipes.
type lineProgress struct {
	w            io.Writer
	every        time.Duration
	phase        string
	total, done  int
	start, shown time.Time
}

func (p *lineProgress) Start(phase string, total int) {
	p.phase, p.total, p.done = phase, total, 0
	p.start, p.shown = time.Now(), time.Now()
	fmt.Fprintf(p.w, "%s ...\n", phase)
}

func (p *lineProgress) count() string {
	if p.total < 0 {
		return fmt.Sprint(p.done)
	}
	return fmt.Sprintf("%d/%d", p.done, p.total)
}

func (p *lineProgress) Add(n int) {
	p.done += n
	if time.Since(p.shown) >= p.every {
		p.shown = time.Now()
		fmt.Fprintf(p.w, "%s: %s\n", p.phase, p.count())
	}
}

func (p *lineProgress) Finish() {
	if p.phase == "" {
		return
	}
	fmt.Fprintf(p.w, "%s: %s, done in %s\n", p.phase, p.count(), time.Since(p.start).Round(time.Millisecond))
	p.phase = ""
}
