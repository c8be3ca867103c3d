package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestStampedValuesWin(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-2026-abc"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ffffffffffffffff"}, {Key: "vcs.time", Value: "2000-01-01T00:00:00Z"}}}
	in := fromBuildInfo("v1.2.3", "0123456789abcdef", "2026-11-30T10:00:00Z", bi)
	if in.Version != "v1.2.3" || in.Commit != "0123456789abcdef" || in.Date != "2026-11-30T10:00:00Z" || in.Go != "go1.26.8" {
		t.Fatalf("got %+v", in)
	}
	if s := in.String(); s != "v1.2.3 (commit 0123456789ab, 2026-11-30T10:00:00Z, go1.26.8)" {
		t.Fatalf("String() = %q", s)
	}
}

// TestToolchainFallback: go install / go build record the module version
// and VCS settings; an unstamped binary uses them.
func TestToolchainFallback(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdefabcdefabcdef"}, {Key: "vcs.time", Value: "2026-11-29T00:00:00Z"},
			{Key: "vcs.modified", Value: "true"}}}
	in := fromBuildInfo("dev", "", "", bi)
	if in.Version != "v0.3.0" || in.Commit != "abcdefabcdefabcdef" || in.Date != "2026-11-29T00:00:00Z" || !in.Modified {
		t.Fatalf("got %+v", in)
	}
	if !strings.Contains(in.String(), "abcdefabcdef+modified") {
		t.Fatalf("String() = %q", in.String())
	}
}

func TestNothingKnown(t *testing.T) {
	in := fromBuildInfo("", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	if in.Version != "dev" || in.Commit != "unknown" || in.Date != "unknown" || in.Go == "" {
		t.Fatalf("got %+v", in)
	}
}
