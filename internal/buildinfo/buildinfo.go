// Package buildinfo describes the running binary: the version, commit and
// build date stamped at link time (make build) or, when not stamped, what
// the Go toolchain recorded (go install, go build in a checkout).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info identifies a build.
type Info struct {
	// Version is a release tag (v1.2.3), a git describe string, a Go
	// pseudo-version, or "dev" when nothing better is known.
	Version string
	// Commit is the VCS revision ("unknown" when not recorded).
	Commit string
	// Date is the commit or build time in RFC 3339 ("unknown" when not
	// recorded).
	Date string
	// Go is the toolchain version (runtime.Version()).
	Go string
	// Modified is true when the checkout had uncommitted changes.
	Modified bool
}

// New combines values stamped with -ldflags -X (any may be empty) with
// the build information the Go toolchain embeds.
func New(version, commit, date string) Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(version, commit, date, bi)
}

func fromBuildInfo(version, commit, date string, bi *debug.BuildInfo) Info {
	in := Info{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if bi != nil {
		if in.Version == "" || in.Version == "dev" {
			if v := bi.Main.Version; v != "" && v != "(devel)" {
				in.Version = v
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Commit == "" {
					in.Commit = s.Value
				}
			case "vcs.time":
				if in.Date == "" {
					in.Date = s.Value
				}
			case "vcs.modified":
				if s.Value == "true" {
					in.Modified = true
				}
			}
		}
		if bi.GoVersion != "" {
			in.Go = bi.GoVersion
		}
	}
	if strings.HasSuffix(in.Version, "-dirty") || strings.HasSuffix(in.Version, "+dirty") {
		in.Modified = true
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	if in.Date == "" {
		in.Date = "unknown"
	}
	return in
}

// ShortCommit is the first 12 characters of the commit.
func (i Info) ShortCommit() string {
	if len(i.Commit) > 12 {
		return i.Commit[:12]
	}
	return i.Commit
}

// String is the one-line form `extenddb version` prints:
// "v1.2.3 (commit 0123456789ab, 2026-11-30T10:00:00Z, go1.26.8)".
func (i Info) String() string {
	c := i.ShortCommit()
	if i.Modified && c != "unknown" {
		c += "+modified"
	}
	return i.Version + " (commit " + c + ", " + i.Date + ", " + i.Go + ")"
}
