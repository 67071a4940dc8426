package cdc

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/kuracache/kura"
)

// Rule maps a row of one table to one cache key. Build it from the views
// the application reads through ([Record], [IndexOf]), from a key template
// ([Template]), or by hand for a custom key function.
type Rule struct {
	// Table is the table the rule reads, schema-qualified or not
	// ("items" means "public.items").
	Table string
	// Columns are the columns the key is made of, in the order Key
	// receives them. They must be in the table's replica identity, so
	// that an UPDATE or DELETE carries their old values.
	Columns []string
	// Key returns the cache key of a row whose Columns hold vals (text
	// forms, as Value.Text). A row whose columns cannot make a key (a
	// NULL in an index column) returns ok false and invalidates nothing.
	Key func(vals []string) (key string, ok bool, err error)
	// Prefix starts every key the rule makes: a TRUNCATE of the table, a
	// transaction over the cap or a lost history invalidates every key
	// under it. It must not be empty.
	Prefix string
}

// Record maps a table's id column to the record cache view reads
// through: the key of a row is view.Key(id). K must be an integer or
// string type (other id types: [RecordFunc]).
func Record[K comparable, V any](table, idColumn string, view *kura.Keyed[K, V]) (Rule, error) {
	parse, err := parserFor[K]()
	if err != nil {
		return Rule{}, fmt.Errorf("cdc: Record %s.%s: %w", table, idColumn, err)
	}
	return RecordFunc(table, idColumn, view, parse)
}

// RecordFunc is Record with the caller's parser from the column's text
// form to the view's id type.
func RecordFunc[K comparable, V any](table, idColumn string, view *kura.Keyed[K, V], parse func(string) (K, error)) (Rule, error) {
	if view == nil {
		return Rule{}, errors.New("cdc: Record needs the records' Keyed view")
	}
	return viewRule(table, idColumn, view.Key, parse)
}

// IndexOf maps a table's indexed column to the id lists of x (the keys
// x.Lists() reads), so that a row inserted into, deleted from or moved
// between index values invalidates the lists of both its old and new
// values. Pair it with a Record rule for the records themselves.
func IndexOf[I comparable, K comparable, V any](table, column string, x *kura.Index[I, K, V]) (Rule, error) {
	if x == nil {
		return Rule{}, errors.New("cdc: IndexOf needs the Index")
	}
	return parsedRule("IndexOf", table, column, x.Lists().Key)
}

// UniqueIndexOf maps a table's uniquely indexed column to the cached ids
// of u (the keys u.IDs() reads), so that a row inserted, deleted or whose
// unique value changed invalidates the entries of both its old and new
// values. Pair it with a Record rule for the records themselves.
func UniqueIndexOf[I comparable, K comparable, V any](table, column string, u *kura.UniqueIndex[I, K, V]) (Rule, error) {
	if u == nil {
		return Rule{}, errors.New("cdc: UniqueIndexOf needs the UniqueIndex")
	}
	return parsedRule("UniqueIndexOf", table, column, u.IDs().Key)
}

// parsedRule is viewRule with the parser of the index value type I; fn
// names the caller in its error.
func parsedRule[I comparable](fn, table, column string, key func(I) string) (Rule, error) {
	parse, err := parserFor[I]()
	if err != nil {
		return Rule{}, fmt.Errorf("cdc: %s %s.%s: %w", fn, table, column, err)
	}
	return viewRule(table, column, key, parse)
}

func viewRule[K comparable](table, column string, key func(K) string, parse func(string) (K, error)) (Rule, error) {
	prefix, err := viewPrefix(key)
	if err != nil {
		return Rule{}, fmt.Errorf("cdc: %s.%s: %w", table, column, err)
	}
	return Rule{
		Table:   table,
		Columns: []string{column},
		Prefix:  prefix,
		Key: func(vals []string) (string, bool, error) {
			id, err := parse(vals[0])
			if err != nil {
				return "", false, err
			}
			return key(id), true, nil
		},
	}, nil
}

// viewPrefix finds the constant part every key of a view starts with:
// the longest common start of the keys of sample ids spread over the id
// type's range (so a key function that pads, like %08d, is not taken for
// a longer prefix than it keeps for every id).
func viewPrefix[K comparable](key func(K) string) (string, error) {
	var zero K
	rv := reflect.ValueOf(&zero).Elem()
	var keys []string
	switch rv.Kind() {
	case reflect.String:
		for _, s := range []string{"", "0", "9", "a", "Z", "~", "\x00", "\xff", "key with spaces"} {
			rv.SetString(s)
			keys = append(keys, key(zero))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := rv.Type().Bits()
		for _, n := range []int64{0, 1, -1, 9, 10, 99, 12345, 1<<(bits-1) - 1, -1 << (bits - 1)} {
			rv.SetInt(n)
			keys = append(keys, key(zero))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := rv.Type().Bits()
		for _, n := range []uint64{0, 1, 9, 10, 99, 12345, 1<<bits - 1} {
			rv.SetUint(n)
			keys = append(keys, key(zero))
		}
	default:
		return "", errors.New("cannot tell the key prefix of this id type: build the Rule by hand with its Prefix")
	}
	p := keys[0]
	for _, k := range keys[1:] {
		n := 0
		for n < len(p) && n < len(k) && p[n] == k[n] {
			n++
		}
		p = p[:n]
	}
	if p == "" {
		return "", errors.New("the view's keys share no prefix (a TRUNCATE could not find them): give the view a Prefix")
	}
	return p, nil
}

func parserFor[K comparable]() (func(string) (K, error), error) {
	var zero K
	switch reflect.ValueOf(&zero).Elem().Kind() {
	case reflect.String:
		return func(s string) (K, error) {
			var k K
			reflect.ValueOf(&k).Elem().SetString(s)
			return k, nil
		}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := reflect.TypeFor[K]().Bits()
		return func(s string) (K, error) {
			n, err := strconv.ParseInt(s, 10, bits)
			var k K
			if err != nil {
				return k, fmt.Errorf("id %q is not an integer", s)
			}
			reflect.ValueOf(&k).Elem().SetInt(n)
			return k, nil
		}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := reflect.TypeFor[K]().Bits()
		return func(s string) (K, error) {
			n, err := strconv.ParseUint(s, 10, bits)
			var k K
			if err != nil {
				return k, fmt.Errorf("id %q is not an unsigned integer", s)
			}
			reflect.ValueOf(&k).Elem().SetUint(n)
			return k, nil
		}, nil
	}
	return nil, fmt.Errorf("id type %s needs a parser (use RecordFunc)", reflect.TypeFor[K]())
}

// Template maps a table to keys spelled by tmpl, where {column} stands
// for the column's text form: "item:{id}" is what a Keyed view with
// Prefix "item:" over integer or string ids reads. The prefix is the
// text before the first brace.
func Template(table, tmpl string) (Rule, error) {
	var (
		lits []string
		cols []string
	)
	rest := tmpl
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return Rule{}, fmt.Errorf("cdc: template %q has a } without {", tmpl)
			}
			lits = append(lits, rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return Rule{}, fmt.Errorf("cdc: template %q has a { without }", tmpl)
		}
		name := rest[i+1 : i+j]
		if name == "" || strings.ContainsAny(name, "{ ") {
			return Rule{}, fmt.Errorf("cdc: template %q has a bad column name %q", tmpl, name)
		}
		lits = append(lits, rest[:i])
		cols = append(cols, name)
		rest = rest[i+j+1:]
	}
	if len(cols) == 0 {
		return Rule{}, fmt.Errorf("cdc: template %q names no {column}", tmpl)
	}
	if lits[0] == "" {
		return Rule{}, fmt.Errorf("cdc: template %q must start with a fixed prefix (TRUNCATE invalidates every key under it)", tmpl)
	}
	return Rule{
		Table:   table,
		Columns: cols,
		Prefix:  lits[0],
		Key: func(vals []string) (string, bool, error) {
			var b strings.Builder
			for i, v := range vals {
				b.WriteString(lits[i])
				b.WriteString(v)
			}
			b.WriteString(lits[len(lits)-1])
			return b.String(), true, nil
		},
	}, nil
}

// QualifiedName returns "schema.table" for a table name, "public" when
// no schema is given.
func QualifiedName(table string) string {
	if strings.IndexByte(table, '.') >= 0 {
		return table
	}
	return "public." + table
}

// Mapping is the set of rules of every mapped table. Build it with
// NewMapping; it is read-only afterwards and safe for concurrent use.
type Mapping struct {
	tables map[string][]Rule
	names  []string
}

// NewMapping checks rules and groups them by table.
func NewMapping(rules ...Rule) (*Mapping, error) {
	if len(rules) == 0 {
		return nil, errors.New("cdc: the mapping has no rules")
	}
	m := &Mapping{tables: map[string][]Rule{}}
	for i, r := range rules {
		if r.Table == "" {
			return nil, fmt.Errorf("cdc: rule %d has no Table", i)
		}
		if len(r.Columns) == 0 || r.Key == nil {
			return nil, fmt.Errorf("cdc: rule %d (%s) needs Columns and Key", i, r.Table)
		}
		if r.Prefix == "" {
			return nil, fmt.Errorf("cdc: rule %d (%s) needs a Prefix (TRUNCATE invalidates every key under it)", i, r.Table)
		}
		t := QualifiedName(r.Table)
		r.Table = t
		if _, ok := m.tables[t]; !ok {
			m.names = append(m.names, t)
		}
		m.tables[t] = append(m.tables[t], r)
	}
	sort.Strings(m.names)
	return m, nil
}

// Tables returns the mapped tables, schema-qualified and sorted.
func (m *Mapping) Tables() []string { return append([]string(nil), m.names...) }

// Columns returns the columns the rules of table read, sorted: they must
// be in the table's replica identity.
func (m *Mapping) Columns(table string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range m.tables[QualifiedName(table)] {
		for _, c := range r.Columns {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Prefixes returns the key prefixes of table's rules: what a TRUNCATE of
// it invalidates.
func (m *Mapping) Prefixes(table string) []string {
	var out []string
	for _, r := range m.tables[QualifiedName(table)] {
		out = append(out, r.Prefix)
	}
	return out
}

// Mapped reports whether table has rules.
func (m *Mapping) Mapped(table string) bool {
	_, ok := m.tables[QualifiedName(table)]
	return ok
}

// errWholeTable says a change's keys cannot be known (an unchanged TOAST
// value in a key column): the table is invalidated whole.
var errWholeTable = errors.New("cdc: key columns not in the change")

// Keys appends to dst the keys c invalidates: for each rule, the key of
// the old image and of the new one (an UPDATE that moves a row between
// index values invalidates both lists). A key column missing from one
// image of an UPDATE is unchanged and taken from the other; missing from
// both (an unchanged TOAST value), it makes Keys return an error matching
// errWholeTable, and the table is invalidated whole. With c.OldPartial, a
// column missing or unknown in the old image of an UPDATE (or the whole
// old image missing) is not taken from the new one: the table is
// invalidated whole.
func (m *Mapping) Keys(dst []string, c *Change) ([]string, error) {
	rules := m.tables[c.Table]
	imgs := [2]Row{c.Old, c.New}
	var vals []string
	for ri := range rules {
		r := &rules[ri]
		if cap(vals) < len(r.Columns) {
			vals = make([]string, len(r.Columns))
		}
		vals = vals[:len(r.Columns)]
		for side, img := range imgs {
			partial := side == 0 && c.OldPartial && c.Op != Insert
			if img == nil {
				if partial && len(r.Columns) > 0 {
					return dst, fmt.Errorf("%w: %s %v: no old image", errWholeTable, c.Table, r.Columns)
				}
				continue
			}
			other := imgs[1-side]
			usable := true
			for i, col := range r.Columns {
				v, has := img[col]
				if !has || v.Unknown {
					if partial {
						return dst, fmt.Errorf("%w: %s %v: old value not sent", errWholeTable, c.Table, r.Columns)
					}
					ov, oh := other[col]
					if !oh || ov.Unknown {
						return dst, fmt.Errorf("%w: %s %v", errWholeTable, c.Table, r.Columns)
					}
					v = ov
				}
				if v.Null {
					usable = false
					break
				}
				vals[i] = v.Text
			}
			if !usable {
				continue
			}
			k, ok, err := r.Key(vals)
			if err != nil {
				return dst, fmt.Errorf("cdc: %s %v: %w", c.Table, r.Columns, err)
			}
			if ok {
				dst = append(dst, k)
			}
		}
	}
	return dst, nil
}
