package postgres

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Speculative and write-lane batches go out through pgconn's pipeline
// directly, as the read lanes do (ADR 0033), instead of pgx.Batch: pgx
// looks up its statement cache, encodes every argument through its type
// map and keeps per-query state and callbacks for results the write
// path never reads. Here each statement is prepared once per connection
// (pgx's Conn.Prepare keeps it by its SQL), its arguments (int64, []byte,
// string: the only kinds these statements take) are encoded in binary
// against the parameter types PostgreSQL inferred, and only each
// statement's success is read.

// Parameter types the write statements use.
const (
	oidInt8  = 20
	oidBytea = 17
	oidText  = 25
)

// binaryParams is the one format code that makes every parameter binary.
var binaryParams = []int16{1}

// errNotSent wraps an error met before anything of the statements was
// sent (preparing them, encoding their arguments): nothing was written.
type errNotSent struct{ err error }

func (e errNotSent) Error() string { return e.err.Error() }
func (e errNotSent) Unwrap() error { return e.err }

// pipeStatements sends stmts on conn as one pipeline closed by one Sync:
// one implicit transaction when no transaction is open, committed at the
// Sync if every statement succeeded. It answers the first error (a
// statement that failed makes the server skip the rest up to the Sync and
// roll back) and whether the last statement's result arrived (the COMMIT
// runs after it, at the Sync). An errNotSent error means nothing was sent.
func pipeStatements(ctx context.Context, conn *pgx.Conn, stmts []specStmt) (lastDone bool, err error) {
	sds := make([]*pgconn.StatementDescription, len(stmts))
	nargs, nints := 0, 0
	for i := range stmts {
		s := &stmts[i]
		if i > 0 && s.sql == stmts[i-1].sql {
			sds[i] = sds[i-1]
		} else {
			sd, err := conn.Prepare(ctx, s.sql, s.sql)
			if err != nil {
				return false, errNotSent{err}
			}
			sds[i] = sd
		}
		if len(sds[i].ParamOIDs) != len(s.args) {
			return false, errNotSent{fmt.Errorf("postgres: %d arguments for %d parameters of %q", len(s.args), len(sds[i].ParamOIDs), s.sql)}
		}
		nargs += len(s.args)
		for _, a := range s.args {
			if _, ok := a.(int64); ok {
				nints++
			}
		}
	}
	// Every argument is encoded before the pipeline starts: a pipeline
	// left with unsent requests closes the connection.
	vals := make([][]byte, 0, nargs)
	ints := make([]byte, 0, 8*nints)
	for i := range stmts {
		for j, a := range stmts[i].args {
			oid := sds[i].ParamOIDs[j]
			switch v := a.(type) {
			case int64:
				if oid != oidInt8 {
					return false, errNotSent{typeMismatch(stmts[i].sql, j, oid, a)}
				}
				ints = binary.BigEndian.AppendUint64(ints, uint64(v))
				vals = append(vals, ints[len(ints)-8:])
			case []byte:
				if oid != oidBytea {
					return false, errNotSent{typeMismatch(stmts[i].sql, j, oid, a)}
				}
				vals = append(vals, v)
			case string:
				if oid != oidText {
					return false, errNotSent{typeMismatch(stmts[i].sql, j, oid, a)}
				}
				vals = append(vals, []byte(v))
			default:
				return false, errNotSent{typeMismatch(stmts[i].sql, j, oid, a)}
			}
		}
	}

	p := conn.PgConn().StartPipeline(ctx)
	at := 0
	for i := range stmts {
		n := len(stmts[i].args)
		formats := binaryParams
		if n == 0 {
			formats = nil
		}
		p.SendQueryStatement(sds[i], vals[at:at+n:at+n], formats, nil)
		at += n
	}
	p.SendPipelineSync()
	if err := p.Flush(); err != nil {
		p.Close()
		return false, err
	}
	for i := range stmts {
		var res any
		res, err = p.GetResults()
		if err == nil {
			if rr, ok := res.(*pgconn.ResultReader); ok {
				_, err = rr.Close()
			} else {
				err = fmt.Errorf("postgres: pipeline: %T where a statement's result was expected", res)
			}
		}
		if err != nil {
			break
		}
		lastDone = i == len(stmts)-1
	}
	if err == nil {
		var res any
		if res, err = p.GetResults(); err == nil {
			if _, ok := res.(*pgconn.PipelineSync); !ok {
				err = fmt.Errorf("postgres: pipeline: %T where its Sync was expected", res)
			}
		}
	}
	// Close reads what is left up to the Sync's ReadyForQuery (the
	// statements the server skipped after a failure answer nothing).
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return lastDone, err
}

func typeMismatch(sql string, j int, oid uint32, a any) error {
	return fmt.Errorf("postgres: parameter $%d of %q has type OID %d, argument %T", j+1, sql, oid, a)
}
