package backend

import (
	"context"
	"testing"
	"time"
)

// fakeLogBackend is a fakeBackend with a change log answering what a test
// sets.
type fakeLogBackend struct {
	fakeBackend
	recs []LogRecord
	info LogInfoResult
}

func (f *fakeLogBackend) ReadLog(context.Context, ReadLogParams) (*ReadLogResult, error) {
	return &ReadLogResult{Records: f.recs}, f.err
}
func (f *fakeLogBackend) LogInfo(context.Context, LogInfoParams) (*LogInfoResult, error) {
	i := f.info
	return &i, f.err
}
func (f *fakeLogBackend) TrimLog(context.Context, TrimLogParams) (*TrimLogResult, error) {
	return &TrimLogResult{}, f.err
}

func (f *fakeLogBackend) Capabilities() Capabilities { return Capabilities{ChangeLog: f} }

// TestCheckedChangeLog: Checked keeps the change log capability (and
// finds none where there is none), and the wrapper reports broken
// answers.
func TestCheckedChangeLog(t *testing.T) {
	if Checked(&fakeBackend{}, nil).Capabilities().ChangeLog != nil {
		t.Fatal("Checked found a change log in a backend without one")
	}
	f := &fakeLogBackend{}
	var violations []error
	cl := Checked(f, func(err error) { violations = append(violations, err) }).Capabilities().ChangeLog
	if cl == nil {
		t.Fatal("Checked lost the change log capability")
	}
	if direct := f.Capabilities().ChangeLog; direct != ChangeLog(f) {
		t.Fatal("the change log of an unwrapped backend is not the backend")
	}
	ctx := context.Background()
	now := time.Now()
	rec := func(seq int64, at time.Time, n int) LogRecord {
		return LogRecord{Seq: seq, At: at, Data: make([]byte, n)}
	}
	cases := []struct {
		name string
		recs []LogRecord
		p    ReadLogParams
		bad  bool
	}{
		{"in order", []LogRecord{rec(3, now, 10), rec(5, now, 10)}, ReadLogParams{After: 2, Limit: 2, MaxBytes: 20}, false},
		{"one record over MaxBytes", []LogRecord{rec(3, now, 50)}, ReadLogParams{Limit: 2, MaxBytes: 20}, false},
		{"not after After", []LogRecord{rec(2, now, 1)}, ReadLogParams{After: 2, Limit: 2}, true},
		{"decreasing Seq", []LogRecord{rec(4, now, 1), rec(3, now, 1)}, ReadLogParams{Limit: 2}, true},
		{"repeated Seq", []LogRecord{rec(4, now, 1), rec(4, now, 1)}, ReadLogParams{Limit: 2}, true},
		{"over Limit", []LogRecord{rec(1, now, 1), rec(2, now, 1)}, ReadLogParams{Limit: 1}, true},
		{"over MaxBytes", []LogRecord{rec(1, now, 15), rec(2, now, 15)}, ReadLogParams{Limit: 5, MaxBytes: 20}, true},
		{"At decreasing", []LogRecord{rec(1, now, 1), rec(2, now.Add(-time.Second), 1)}, ReadLogParams{Limit: 5}, true},
		{"Limit 0", nil, ReadLogParams{}, true},
	}
	for _, c := range cases {
		violations = nil
		f.recs = c.recs
		_, err := cl.ReadLog(ctx, c.p)
		if got := len(violations) > 0; got != c.bad || (c.bad && !IsKind(err, KindInternal)) {
			t.Errorf("%s: violations %v, error %v; want violation %v", c.name, violations, err, c.bad)
		}
	}
	for _, c := range []struct {
		info LogInfoResult
		bad  bool
	}{
		{LogInfoResult{}, false},
		{LogInfoResult{Last: 7}, false},
		{LogInfoResult{First: 3, Last: 7, Count: 4}, false},
		{LogInfoResult{First: 3, Last: 7}, true},
		{LogInfoResult{Last: 7, Count: 2}, true},
		{LogInfoResult{First: 8, Last: 7, Count: 1}, true},
	} {
		violations = nil
		f.info = c.info
		cl.LogInfo(ctx, LogInfoParams{})
		if got := len(violations) > 0; got != c.bad {
			t.Errorf("LogInfo %+v: violations %v, want violation %v", c.info, violations, c.bad)
		}
	}
	violations = nil
	f.err = Errorf(KindTableNotFound, "gone")
	if _, err := cl.TrimLog(ctx, TrimLogParams{}); !IsKind(err, KindTableNotFound) || len(violations) > 0 {
		t.Fatalf("TableNotFound: %v, violations %v", err, violations)
	}
	f.err = Errorf(KindTableVersion, "undeclared")
	if _, err := cl.LogInfo(ctx, LogInfoParams{}); !IsKind(err, KindInternal) || len(violations) != 1 {
		t.Fatalf("undeclared kind: %v, violations %v", err, violations)
	}
}
