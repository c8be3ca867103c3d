package engine

// streamState is one stream of a table (storedTable.Streams).
type streamState struct {
	Label   string       `json:"label"`
	View    string       `json:"view"`
	Created int64        `json:"created"`         // unix ms
	Ended   int64        `json:"ended,omitempty"` // unix ms when disabled; 0 while enabled
	Shards  []shardState `json:"shards"`          // in Gen order
}

// shardState is one shard of a stream.
type shardState struct {
	Gen     int64 `json:"gen"`
	Created int64 `json:"created"`          // unix ms
	From    int64 `json:"from"`             // records have Seq > From
	Closed  int64 `json:"closed,omitempty"` // unix ms when closed; 0 while open
	// End bounds the records of a closed shard (Seq <= End): the log's
	// last Seq read after the close committed. 0 while not yet settled.
	End int64 `json:"end,omitempty"`
}

// liveStream is the enabled stream as item writes need it.
type liveStream struct {
	label string
	view  byte // viewKeys, viewNew, viewOld, viewBoth
	gen   int64
	// full: point-in-time recovery is on, so the record keeps both images
	// whatever the view (flagFull); a stream filters them when it reads.
	full bool
}

// pitrOnly is the record writer of a PITR table without an enabled
// stream: its records have no label, so no shard ever shows them.
var pitrOnly = liveStream{view: viewBoth, full: true}

// logs tells whether the table's writes log change records.
func (t *table) logs() bool { return t.stream != nil || t.pitr }

// logger is how the table's writes log their records: nil when they log
// none (no stream, point-in-time recovery off).
func (t *table) logger() *liveStream {
	switch {
	case t.stream != nil && t.pitr:
		s := *t.stream
		s.full = true
		return &s
	case t.stream != nil:
		return t.stream
	case t.pitr:
		return &pitrOnly
	}
	return nil
}

const (
	viewKeys byte = iota
	viewNew
	viewOld
	viewBoth
)

func viewCode(v string) byte {
	switch v {
	case "NEW_IMAGE":
		return viewNew
	case "OLD_IMAGE":
		return viewOld
	case "NEW_AND_OLD_IMAGES":
		return viewBoth
	}
	return viewKeys
}

// parseStreams sets t.stream from the stored streams.
func (t *table) parseStreams() {
	n := len(t.stored.Streams)
	if n == 0 {
		return
	}
	s := &t.stored.Streams[n-1]
	if s.Ended != 0 || len(s.Shards) == 0 {
		return
	}
	sh := s.Shards[len(s.Shards)-1]
	if sh.Closed != 0 {
		return
	}
	t.stream = &liveStream{label: s.Label, view: viewCode(s.View), gen: sh.Gen}
}
