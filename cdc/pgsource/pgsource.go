// Package pgsource is a cdc.Source over PostgreSQL logical replication
// (the pgoutput plugin, through github.com/jackc/pglogrepl): it creates
// the publication and the slot if absent, checks what the mapping needs
// (wal_level, the REPLICATION privilege, each table's REPLICA IDENTITY)
// with errors that name the fix, and streams committed transactions from
// the slot's confirmed position.
package pgsource

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/kuracache/kura/cdc"
)

// Options configure a Source. ConnString and Mapping are required.
type Options struct {
	// ConnString is a libpq connection string or URL for a role with the
	// REPLICATION attribute. Give the password through PGPASSWORD or a
	// passfile (passfile=... or PGPASSFILE), never in the string.
	ConnString string
	// Password, when set, is the role's password (read by the caller from
	// a file or a secret store); it overrides PGPASSWORD and the passfile.
	Password string
	// Mapping says which tables and columns matter: the publication
	// covers its tables and the replica identity check its columns.
	Mapping *cdc.Mapping
	// Slot is the logical replication slot (created if absent). If
	// empty, "kura_cdc".
	Slot string
	// Publication is the publication (created over the mapped tables if
	// absent; an existing one must include them). If empty, "kura_cdc".
	Publication string
	// StatusInterval is how often the confirmed position is reported to
	// PostgreSQL when it has not changed (it is also reported as soon
	// as it changes). If zero, 1 s.
	StatusInterval time.Duration
}

// LSN is a PostgreSQL write-ahead log position, a cdc.Position.
type LSN pglogrepl.LSN

// String formats the LSN as PostgreSQL does (16/B374D848).
func (l LSN) String() string { return pglogrepl.LSN(l).String() }

// Source streams one PostgreSQL database. It is a cdc.Source.
type Source struct {
	opts      Options
	cfg       *pgconn.Config
	confirmed atomic.Uint64 // the highest LSN confirmed by the Runner
	kick      chan struct{}

	mu      sync.Mutex
	backlog *pgx.Conn
}

var _ cdc.Source = (*Source)(nil)

// New checks opts and returns a Source; it does not connect.
func New(opts Options) (*Source, error) {
	if opts.Mapping == nil {
		return nil, errors.New("pgsource: Options.Mapping is required")
	}
	if opts.ConnString == "" {
		return nil, errors.New("pgsource: Options.ConnString is required")
	}
	cfg, err := pgconn.ParseConfig(opts.ConnString)
	if err != nil {
		// Neither pgconn's message (it can hold the tail of a password
		// with "#" or "?" in it) nor the string, masked or not: one that
		// does not parse has no certain password boundaries.
		return nil, errors.New("pgsource: the connection string does not parse (not shown: it may hold a password); give postgres://user@127.0.0.1:5432/dbname?sslmode=disable, with / # ? @ % in a part URL-escaped, or libpq's keyword/value form (host=127.0.0.1 user=kura dbname=app)")
	}
	if opts.Password != "" {
		cfg.Password = opts.Password
	}
	if opts.Slot == "" {
		opts.Slot = "kura_cdc"
	}
	if len(opts.Slot) > 59 {
		return nil, fmt.Errorf("pgsource: slot name %q is longer than 59 characters (PostgreSQL allows 63, and cdc appends _new while it creates the slot)", opts.Slot)
	}
	if opts.Publication == "" {
		opts.Publication = "kura_cdc"
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = time.Second
	}
	return &Source{opts: opts, cfg: cfg, kick: make(chan struct{}, 1)}, nil
}

// Confirm implements cdc.Source.
func (s *Source) Confirm(pos cdc.Position) {
	l, ok := pos.(LSN)
	if !ok {
		return
	}
	for {
		old := s.confirmed.Load()
		if uint64(l) <= old || s.confirmed.CompareAndSwap(old, uint64(l)) {
			break
		}
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Backlog implements cdc.Source: the WAL the slot retains.
func (s *Source) Backlog(ctx context.Context) (cdc.Backlog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.backlog == nil || s.backlog.IsClosed() {
		c, err := pgx.ConnectConfig(ctx, s.connConfig())
		if err != nil {
			return cdc.Backlog{}, err
		}
		s.backlog = c
	}
	var (
		b        cdc.Backlog
		retained *int64
		conf     *string
	)
	err := s.backlog.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - restart_lsn)::bigint, confirmed_flush_lsn::text, pg_current_wal_lsn()::text
		FROM pg_replication_slots WHERE slot_name = $1`, s.opts.Slot).Scan(&retained, &conf, &b.Head)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, nil
	}
	if err != nil {
		s.backlog.Close(ctx)
		s.backlog = nil
		return b, err
	}
	if retained != nil {
		b.RetainedBytes = *retained
	}
	if conf != nil {
		b.Confirmed = *conf
	}
	return b, nil
}

// Close releases the connection Backlog keeps.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.backlog != nil {
		err := s.backlog.Close(context.Background())
		s.backlog = nil
		return err
	}
	return nil
}

func (s *Source) connConfig() *pgx.ConnConfig {
	cfg, _ := pgx.ParseConfig(s.opts.ConnString) // parsed in New
	if s.opts.Password != "" {
		cfg.Password = s.opts.Password
	}
	return cfg
}

func fatal(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{cdc.ErrFatal}, args...)...)
}

// prepare checks the database and creates the publication and the slot
// when absent. It reports whether the slot is new (the history since the
// last run is unknown).
func (s *Source) prepare(ctx context.Context) (fresh bool, reason string, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.connConfig())
	if err != nil {
		return false, "", err
	}
	defer conn.Close(context.Background())

	var walLevel string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel); err != nil {
		return false, "", err
	}
	if walLevel != "logical" {
		return false, "", fatal("PostgreSQL runs with wal_level = %s; the change stream needs wal_level = logical (ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL)", walLevel)
	}
	var (
		role string
		repl bool
	)
	if err := conn.QueryRow(ctx, `SELECT current_user, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&role, &repl); err != nil {
		return false, "", err
	}
	if !repl {
		return false, "", fatal("role %q lacks the REPLICATION attribute that logical replication needs: run ALTER ROLE %s REPLICATION (and let it connect in pg_hba.conf)", role, pgx.Identifier{role}.Sanitize())
	}
	if err := checkIdentities(ctx, conn, s.opts.Mapping); err != nil {
		return false, "", err
	}
	if err := s.ensurePublication(ctx, conn); err != nil {
		return false, "", err
	}

	var (
		plugin, walStatus *string
		found             bool
	)
	err = conn.QueryRow(ctx, `SELECT plugin, wal_status FROM pg_replication_slots WHERE slot_name = $1`, s.opts.Slot).Scan(&plugin, &walStatus)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return false, "", err
	default:
		found = true
	}
	if found && (plugin == nil || *plugin != "pgoutput") {
		return false, "", fatal("replication slot %q exists but is not a pgoutput logical slot: name another slot (or drop it)", s.opts.Slot)
	}
	if found && walStatus != nil && *walStatus == "lost" {
		if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", s.opts.Slot); err != nil {
			return false, "", fmt.Errorf("pgsource: dropping the lost slot %q: %w", s.opts.Slot, err)
		}
		found = false
		reason = fmt.Sprintf("replication slot %q lost WAL it needed (max_slot_wal_keep_size); it was recreated", s.opts.Slot)
	}
	if !found {
		if reason == "" {
			reason = fmt.Sprintf("replication slot %q did not exist (first run, or it was dropped); it was created", s.opts.Slot)
		}
		return true, reason, nil
	}
	return false, "", nil
}

// CheckReplicaIdentity connects as opts say (ConnString, Password,
// Mapping; the slot and publication are not touched) and checks, as
// Stream does at its start, that every table of opts.Mapping logs the old
// values of the columns the mapping reads: REPLICA IDENTITY FULL, or an
// identity (primary key, USING INDEX) that holds them. The error (it
// matches cdc.ErrFatal) names the ALTER TABLE that fixes it. Another
// reader of the same log needs the same: Debezium's PostgreSQL connector
// takes its before image from the replica identity too.
func CheckReplicaIdentity(ctx context.Context, opts Options) error {
	s, err := New(opts)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, s.connConfig())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return checkIdentities(ctx, conn, opts.Mapping)
}

func checkIdentities(ctx context.Context, conn *pgx.Conn, m *cdc.Mapping) error {
	for _, table := range m.Tables() {
		if err := checkIdentity(ctx, conn, table, m.Columns(table)); err != nil {
			return err
		}
	}
	return nil
}

// checkIdentity refuses a table whose replica identity leaves out a
// column the mapping reads: an UPDATE or DELETE would not carry its old
// value, and the old key (an index list the row moved out of) would stay.
func checkIdentity(ctx context.Context, conn *pgx.Conn, table string, cols []string) error {
	schema, name, _ := strings.Cut(table, ".")
	var (
		oid   uint32
		ident string
	)
	err := conn.QueryRow(ctx, `SELECT c.oid, c.relreplident::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`, schema, name).Scan(&oid, &ident)
	if errors.Is(err, pgx.ErrNoRows) {
		return fatal("the mapping names table %s, which does not exist", table)
	}
	if err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped`, oid)
	if err != nil {
		return err
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	has := map[string]bool{}
	for _, c := range all {
		has[c] = true
	}
	for _, c := range cols {
		if !has[c] {
			return fatal("the mapping reads column %q of %s, which has no such column", c, table)
		}
	}
	var idCols []string
	what := ""
	switch ident {
	case "f":
		return nil
	case "n":
		what = "REPLICA IDENTITY NOTHING carries no old row"
	case "d", "i":
		cond := "i.indisprimary"
		what = "REPLICA IDENTITY DEFAULT carries only the primary key"
		if ident == "i" {
			cond = "i.indisreplident"
			what = "REPLICA IDENTITY USING INDEX carries only the index's columns"
		}
		rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
			WHERE i.indrelid = $1 AND `+cond, oid)
		if err != nil {
			return err
		}
		idCols, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(idCols) == 0 && ident == "d" {
			what = "REPLICA IDENTITY DEFAULT without a primary key carries no old row"
		}
	}
	inID := map[string]bool{}
	for _, c := range idCols {
		inID[c] = true
	}
	var missing []string
	for _, c := range cols {
		if !inID[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fatal("table %s: %s (%s), so an UPDATE or DELETE would not say which cache keys the old row had (columns %s): run ALTER TABLE %s REPLICA IDENTITY FULL",
		table, what, strings.Join(idCols, ", "), strings.Join(missing, ", "), quoteTable(table))
}

func quoteTable(table string) string {
	schema, name, _ := strings.Cut(table, ".")
	return pgx.Identifier{schema, name}.Sanitize()
}

func (s *Source) ensurePublication(ctx context.Context, conn *pgx.Conn) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, s.opts.Publication).Scan(&exists); err != nil {
		return err
	}
	tables := s.opts.Mapping.Tables()
	pub := pgx.Identifier{s.opts.Publication}.Sanitize()
	if !exists {
		q := make([]string, len(tables))
		for i, t := range tables {
			q[i] = quoteTable(t)
		}
		_, err := conn.Exec(ctx, "CREATE PUBLICATION "+pub+" FOR TABLE "+strings.Join(q, ", "))
		if err != nil && !isCode(err, "42710") { // created meanwhile by a standby
			return fmt.Errorf("pgsource: creating publication %s: %w", pub, err)
		}
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = $1`, s.opts.Publication)
	if err != nil {
		return err
	}
	in, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, t := range in {
		have[t] = true
	}
	for _, t := range tables {
		if !have[t] {
			return fatal("publication %s does not include %s: run ALTER PUBLICATION %s ADD TABLE %s", pub, t, pub, quoteTable(t))
		}
	}
	return nil
}

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// Stream implements cdc.Source.
func (s *Source) Stream(ctx context.Context, h cdc.Handler) error {
	fresh, reason, err := s.prepare(ctx)
	if err != nil {
		return err
	}
	rcfg := s.cfg.Copy()
	if rcfg.RuntimeParams == nil {
		rcfg.RuntimeParams = map[string]string{}
	}
	rcfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, rcfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if fresh {
		if err := s.createSlot(ctx, conn, h, reason); err != nil {
			return err
		}
	}
	err = pglogrepl.StartReplication(ctx, conn, s.opts.Slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + strings.ReplaceAll(s.opts.Publication, "'", "''") + "'"},
	})
	if err != nil {
		if isCode(err, "55006") {
			return fmt.Errorf("pgsource: standing by: slot %q is in use by another consumer (%w)", s.opts.Slot, err)
		}
		return fmt.Errorf("pgsource: starting replication on slot %q: %w", s.opts.Slot, err)
	}
	return s.loop(ctx, conn, h)
}

// pendingSlot is the name a new slot has until the reset that goes with it
// has been applied.
func (s *Source) pendingSlot() string { return s.opts.Slot + "_new" }

// createSlot makes a new slot without a window in which a crash loses a
// reset: the slot is created under a pending name, every mapped table is
// invalidated (h.Reset returns once that landed on every target), and only
// then is the slot copied to its real name (same confirmed position) and
// the pending one dropped. A crash before the copy leaves no slot under
// the real name, so the next run starts over with a reset; one after it
// finds the slot and resumes.
func (s *Source) createSlot(ctx context.Context, rconn *pgconn.PgConn, h cdc.Handler, reason string) error {
	conn, err := pgx.ConnectConfig(ctx, s.connConfig())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	pending := s.pendingSlot()
	// A pending slot left by a consumer that died before its reset
	// landed: drop it (an active one belongs to a live consumer).
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, pending); err != nil {
		return fmt.Errorf("pgsource: dropping the leftover slot %q: %w", pending, err)
	}
	if _, err := pglogrepl.CreateReplicationSlot(ctx, rconn, pending, "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		if isCode(err, "42710") {
			return fmt.Errorf("pgsource: another consumer is creating slot %q", s.opts.Slot)
		}
		return fmt.Errorf("pgsource: creating replication slot %q: %w", pending, err)
	}
	// Everything cached may predate the slot: invalidate it all first.
	if err := h.Reset(reason); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_copy_logical_replication_slot($1, $2)", pending, s.opts.Slot); err != nil {
		if isCode(err, "42710") {
			return fmt.Errorf("pgsource: slot %q was created by another consumer meanwhile", s.opts.Slot)
		}
		return fmt.Errorf("pgsource: publishing slot %q: %w", s.opts.Slot, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", pending); err != nil {
		return fmt.Errorf("pgsource: dropping slot %q: %w", pending, err)
	}
	return nil
}

type relation struct {
	table  string
	mapped bool
	cols   []string // column names by position
	want   []bool   // by position: a column the mapping reads
}

func (s *Source) loop(ctx context.Context, conn *pgconn.PgConn, h cdc.Handler) error {
	rels := map[uint32]*relation{}
	var (
		sent      uint64 // last confirmed LSN reported to the server
		lastSent  time.Time
		inTxn     bool
		seen      uint64 // the end of the last transaction or keepalive handed to h
		received  uint64 // the server's WAL end in the last keepalive: everything before it was received
		change    cdc.Change
		tick      = min(s.opts.StatusInterval, 100*time.Millisecond)
		replyNow  bool
		truncated []string
		deadline  time.Time
		netConn   = conn.Conn()
	)
	defer func() { _ = netConn.SetReadDeadline(time.Time{}) }()
	for {
		// The confirmed position goes out at most every 100 ms (the slot
		// only needs it to release WAL), or at once when asked.
		if c := s.confirmed.Load(); replyNow || (c > sent && time.Since(lastSent) >= tick) || time.Since(lastSent) >= s.opts.StatusInterval {
			if c > sent {
				sent = c
			}
			var err error
			if replyNow && sent < received {
				err = sendReceived(conn, received)
			} else {
				err = pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pglogrepl.LSN(sent)})
			}
			if err != nil {
				return fmt.Errorf("pgsource: reporting the confirmed position: %w", err)
			}
			lastSent, replyNow = time.Now(), false
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A read deadline on the socket, renewed per window rather than
		// a context per message: pgconn watches a cancellable context
		// with a callback per call, which cost more than the decoding.
		// A timeout leaves the connection usable.
		if now := time.Now(); deadline.Sub(now) < tick/2 {
			deadline = now.Add(tick)
			if err := netConn.SetReadDeadline(deadline); err != nil {
				return fmt.Errorf("pgsource: %w", err)
			}
		}
		raw, err := conn.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				deadline = time.Time{}
				continue
			}
			return fmt.Errorf("pgsource: receiving: %w", err)
		}
		switch m := raw.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("pgsource: the server ended replication: %s (SQLSTATE %s)", m.Message, m.Code)
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return fmt.Errorf("pgsource: %w", err)
				}
				if pkm.ReplyRequested {
					replyNow = true
				}
				received = max(received, uint64(pkm.ServerWALEnd))
				// The walsender has decoded everything up to its end:
				// no mapped transaction ends before it that it has
				// not sent. Confirming it (once what came before is
				// applied) lets the slot advance on an idle database.
				if !inTxn && uint64(pkm.ServerWALEnd) > seen {
					seen = uint64(pkm.ServerWALEnd)
					if err := h.Idle(LSN(pkm.ServerWALEnd)); err != nil {
						return err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return fmt.Errorf("pgsource: %w", err)
				}
				msg, err := pglogrepl.Parse(xld.WALData)
				if err != nil {
					return fmt.Errorf("pgsource: decoding pgoutput: %w", err)
				}
				switch msg := msg.(type) {
				case *pglogrepl.RelationMessage:
					r := &relation{table: msg.Namespace + "." + msg.RelationName}
					r.mapped = s.opts.Mapping.Mapped(r.table)
					wanted := map[string]bool{}
					for _, c := range s.opts.Mapping.Columns(r.table) {
						wanted[c] = true
					}
					for _, c := range msg.Columns {
						r.cols = append(r.cols, c.Name)
						r.want = append(r.want, wanted[c.Name])
					}
					rels[msg.RelationID] = r
				case *pglogrepl.BeginMessage:
					inTxn = true
					truncated = truncated[:0]
				case *pglogrepl.CommitMessage:
					inTxn = false
					if len(truncated) > 0 {
						if err := h.Truncate(truncated); err != nil {
							return err
						}
						truncated = truncated[:0]
					}
					seen = max(seen, uint64(msg.TransactionEndLSN))
					if err := h.Commit(LSN(msg.TransactionEndLSN), msg.CommitTime); err != nil {
						return err
					}
				case *pglogrepl.InsertMessage:
					if r, err := rel(rels, msg.RelationID); err != nil || !r.mapped {
						if err != nil {
							return err
						}
						continue
					}
					r := rels[msg.RelationID]
					change = cdc.Change{Table: r.table, Op: cdc.Insert, New: row(r, msg.Tuple)}
					if err := h.Change(&change); err != nil {
						return err
					}
				case *pglogrepl.UpdateMessage:
					r, err := rel(rels, msg.RelationID)
					if err != nil {
						return err
					}
					if !r.mapped {
						continue
					}
					change = cdc.Change{Table: r.table, Op: cdc.Update, New: row(r, msg.NewTuple)}
					if msg.OldTuple != nil {
						change.Old = row(r, msg.OldTuple)
					}
					if err := h.Change(&change); err != nil {
						return err
					}
				case *pglogrepl.DeleteMessage:
					r, err := rel(rels, msg.RelationID)
					if err != nil {
						return err
					}
					if !r.mapped {
						continue
					}
					change = cdc.Change{Table: r.table, Op: cdc.Delete, Old: row(r, msg.OldTuple)}
					if err := h.Change(&change); err != nil {
						return err
					}
				case *pglogrepl.TruncateMessage:
					for _, id := range msg.RelationIDs {
						r, err := rel(rels, id)
						if err != nil {
							return err
						}
						if r.mapped {
							truncated = append(truncated, r.table)
						}
					}
				}
			}
		}
	}
}

// sendReceived answers a keepalive that asks for a reply while the
// confirmed position trails what was received: a status that reports
// everything up to received as written and no flush position (invalid, 0).
//
// A WAL sender that is shutting down (a fast or smart shutdown) asks for
// replies until the consumer reports, as flushed or, when the flush
// position is invalid, as written, every position it sent; until then
// PostgreSQL does not stop, and a consumer that keeps answering is never
// timed out (wal_sender_timeout). While a target is down cdc cannot
// confirm, so the shutdown would wait for the target
// (TestFastShutdownDoesNotWaitForAStoppedTarget: for ever). The written
// position only informs (pg_stat_replication.write_lsn); a logical
// slot's confirmed_flush_lsn moves only with a valid flush position, so
// this lets PostgreSQL stop without confirming anything not yet applied
// on every target. pglogrepl.SendStandbyStatusUpdate replaces a zero
// flush position by the written one, so this message is built here.
func sendReceived(conn *pgconn.PgConn, received uint64) error {
	data := make([]byte, 0, 34)
	data = append(data, pglogrepl.StandbyStatusUpdateByteID)
	data = binary.BigEndian.AppendUint64(data, received) // written
	data = binary.BigEndian.AppendUint64(data, 0)        // flushed: invalid, confirms nothing
	data = binary.BigEndian.AppendUint64(data, 0)        // applied: invalid
	data = binary.BigEndian.AppendUint64(data, uint64(time.Since(pgEpoch).Microseconds()))
	data = append(data, 0) // no reply requested
	buf, err := (&pgproto3.CopyData{Data: data}).Encode(nil)
	if err != nil {
		return err
	}
	return conn.Frontend().SendUnbufferedEncodedCopyData(buf)
}

// pgEpoch is the origin of PostgreSQL's timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func rel(rels map[uint32]*relation, id uint32) (*relation, error) {
	r, ok := rels[id]
	if !ok {
		return nil, fmt.Errorf("pgsource: a change names relation %d before its description", id)
	}
	return r, nil
}

// row decodes the columns the mapping reads of a tuple into a cdc.Row of
// text values.
func row(r *relation, t *pglogrepl.TupleData) cdc.Row {
	if t == nil {
		return nil
	}
	out := make(cdc.Row, 2)
	for i, c := range t.Columns {
		if i >= len(r.cols) {
			break
		}
		if !r.want[i] {
			continue
		}
		switch c.DataType {
		case 'n':
			out[r.cols[i]] = cdc.Value{Null: true}
		case 'u':
			out[r.cols[i]] = cdc.Value{Unknown: true}
		case 't':
			out[r.cols[i]] = cdc.Value{Text: string(c.Data)}
		}
	}
	return out
}
