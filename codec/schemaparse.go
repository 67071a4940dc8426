package codec

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Published schemas: what lets a reader without the writer's Go type
// (kura inspect, kura ui, the Node package) give the values of a
// msgpack-array entry their field names. The writer publishes SchemaOf's
// description of its type (dictstore.Registry.PublishSchema); a reader
// looks it up by the fingerprint the entry carries, checks that the
// description hashes to it, parses it (ParseSchema) and names the decoded
// arrays (Schema.Named). docs/FORMAT.md, "Published schemas".

// Limits of ParseSchema: a description is at most MaxSchemaLen bytes,
// nested at most MaxSchemaDepth levels.
const (
	MaxSchemaLen   = 64 << 10
	MaxSchemaDepth = 64
)

// ErrSchemaDescription matches every error of ParseSchema and of
// Schema.Named: a description that is not SchemaOf's grammar, or a value
// whose shape is not the one the description gives. A reader treats the
// entry as not understood (shows it without names), never as named.
var ErrSchemaDescription = errors.New("kura: codec: schema description")

// Schema is a parsed schema description (SchemaOf's grammar).
type Schema struct {
	// Kind is one of "bool", "int", "float", "complex", "string",
	// "bytes", "any", "slice", "map", "struct", "custom", "ref" and
	// "invalid".
	Kind string
	// Fields are a struct's fields in order (Kind "struct").
	Fields []SchemaField
	// Key and Elem are a map's key and element, Elem a slice's element.
	Key, Elem *Schema
	// Ref is the struct a "ref" (@N) names: N levels from the outermost
	// struct being described.
	Ref int
	// Name is a custom type's path.Name, or an invalid kind's name.
	Name string
}

// SchemaField is one field of a struct Schema.
type SchemaField struct {
	Name string
	Type *Schema
}

// SchemaFingerprint returns the fingerprint of a description, as
// Fingerprint returns it for the type SchemaOf described.
func SchemaFingerprint(desc string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(desc))
	return h.Sum32()
}

// ParseSchema parses desc, a description SchemaOf wrote. Errors match
// ErrSchemaDescription.
func ParseSchema(desc string) (*Schema, error) {
	if len(desc) > MaxSchemaLen {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrSchemaDescription, len(desc), MaxSchemaLen)
	}
	p := schemaParser{s: desc}
	s, err := p.parse(0, 0)
	if err != nil {
		return nil, err
	}
	if p.i != len(desc) {
		return nil, p.errorf("text after the description")
	}
	return s, nil
}

type schemaParser struct {
	s string
	i int
}

func (p *schemaParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrSchemaDescription, p.i, fmt.Sprintf(format, args...))
}

func (p *schemaParser) take(prefix string) bool {
	if strings.HasPrefix(p.s[p.i:], prefix) {
		p.i += len(prefix)
		return true
	}
	return false
}

// parse reads one type; depth counts nesting, structs the structs
// around it (what @N may name).
func (p *schemaParser) parse(depth, structs int) (*Schema, error) {
	if depth > MaxSchemaDepth {
		return nil, p.errorf("nested over %d levels", MaxSchemaDepth)
	}
	for _, k := range [...]string{"bool", "int", "float", "complex", "string", "bytes", "any"} {
		if p.take(k) {
			return &Schema{Kind: k}, nil
		}
	}
	switch {
	case p.take("[]"):
		e, err := p.parse(depth+1, structs)
		if err != nil {
			return nil, err
		}
		return &Schema{Kind: "slice", Elem: e}, nil
	case p.take("map["):
		k, err := p.parse(depth+1, structs)
		if err != nil {
			return nil, err
		}
		if !p.take("]") {
			return nil, p.errorf("map key not closed by ]")
		}
		e, err := p.parse(depth+1, structs)
		if err != nil {
			return nil, err
		}
		return &Schema{Kind: "map", Key: k, Elem: e}, nil
	case p.take("{"):
		s := &Schema{Kind: "struct"}
		for !p.take("}") {
			if len(s.Fields) > 0 && !p.take(",") {
				return nil, p.errorf("fields not separated by ,")
			}
			name, err := p.quoted()
			if err != nil {
				return nil, err
			}
			if !p.take(":") {
				return nil, p.errorf("field %q has no :", name)
			}
			t, err := p.parse(depth+1, structs+1)
			if err != nil {
				return nil, err
			}
			s.Fields = append(s.Fields, SchemaField{Name: name, Type: t})
		}
		return s, nil
	case p.take("@"):
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		n, err := strconv.Atoi(p.s[start:p.i])
		if err != nil || n >= structs {
			return nil, p.errorf("reference @%s to no struct around it", p.s[start:p.i])
		}
		return &Schema{Kind: "ref", Ref: n}, nil
	case p.take("custom("):
		return p.named("custom")
	case p.take("invalid("):
		return p.named("invalid")
	}
	return nil, p.errorf("no type")
}

// named reads the rest of custom(...) or invalid(...).
func (p *schemaParser) named(kind string) (*Schema, error) {
	{
		// A type path has balanced brackets and parentheses (generic
		// instantiations); it ends at the ) that closes custom( .
		start, open := p.i, 1
		for ; p.i < len(p.s); p.i++ {
			switch p.s[p.i] {
			case '(':
				open++
			case ')':
				open--
			}
			if open == 0 {
				break
			}
		}
		if open != 0 {
			return nil, p.errorf("%s( not closed", kind)
		}
		name := p.s[start:p.i]
		p.i++
		return &Schema{Kind: kind, Name: name}, nil
	}
}

// quoted reads a Go-quoted field name.
func (p *schemaParser) quoted() (string, error) {
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", p.errorf("field name not quoted")
	}
	prefix, err := strconv.QuotedPrefix(p.s[p.i:])
	if err != nil {
		return "", p.errorf("field name: %v", err)
	}
	name, err := strconv.Unquote(prefix)
	if err != nil {
		return "", p.errorf("field name: %v", err)
	}
	p.i += len(prefix)
	return name, nil
}

// Named returns v, a msgpack-array payload decoded into an `any` (every
// struct an array of its field values), with each struct the schema
// describes turned into a map from field names to values (map[string]any).
// A value whose shape differs from the schema's (an array of another
// length where a struct is, a map where a slice is) is an error matching
// ErrSchemaDescription: never a guess. nil stands for any value (a nil
// pointer, slice or map).
func (s *Schema) Named(v any) (any, error) {
	return s.name(v, nil, 0)
}

// maxNameDepth bounds Name's recursion (a recursive type's value may be
// deeper than its description).
const maxNameDepth = 4096

func (s *Schema) name(v any, stack []*Schema, depth int) (any, error) {
	if v == nil {
		return nil, nil
	}
	if depth > maxNameDepth {
		return nil, fmt.Errorf("%w: value nested deeper than its schema allows", ErrSchemaDescription)
	}
	switch s.Kind {
	case "ref":
		if s.Ref >= len(stack) {
			return nil, fmt.Errorf("%w: reference @%d to no struct", ErrSchemaDescription, s.Ref)
		}
		return stack[s.Ref].name(v, stack[:s.Ref], depth+1)
	case "struct":
		a, ok := v.([]any)
		if !ok || len(a) != len(s.Fields) {
			return nil, fmt.Errorf("%w: a struct of %d fields, the value is %s", ErrSchemaDescription, len(s.Fields), shapeOf(v))
		}
		stack = append(stack, s)
		out := make(map[string]any, len(a))
		for i, f := range s.Fields {
			x, err := f.Type.name(a[i], stack, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			out[f.Name] = x
		}
		return out, nil
	case "slice":
		a, ok := v.([]any)
		if !ok {
			if _, bin := v.([]byte); bin {
				return v, nil // a byte array's elements, as bin
			}
			return nil, fmt.Errorf("%w: a slice, the value is %s", ErrSchemaDescription, shapeOf(v))
		}
		out := make([]any, len(a))
		for i, e := range a {
			x, err := s.Elem.name(e, stack, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = x
		}
		return out, nil
	case "map":
		switch m := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(m))
			for k, e := range m {
				x, err := s.Elem.name(e, stack, depth+1)
				if err != nil {
					return nil, fmt.Errorf("[%q]: %w", k, err)
				}
				out[k] = x
			}
			return out, nil
		case map[any]any:
			out := make(map[any]any, len(m))
			for k, e := range m {
				x, err := s.Elem.name(e, stack, depth+1)
				if err != nil {
					return nil, fmt.Errorf("[%v]: %w", k, err)
				}
				out[k] = x
			}
			return out, nil
		}
		return nil, fmt.Errorf("%w: a map, the value is %s", ErrSchemaDescription, shapeOf(v))
	case "invalid":
		return nil, fmt.Errorf("%w: invalid(%s) holds no value", ErrSchemaDescription, s.Name)
	}
	// Scalars as decoded, if of their kind; any and custom as decoded.
	ok := true
	switch s.Kind {
	case "bool":
		_, ok = v.(bool)
	case "int":
		switch v.(type) {
		case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		default:
			ok = false
		}
	case "float":
		switch v.(type) {
		case float32, float64:
		default:
			ok = false
		}
	case "string":
		_, ok = v.(string)
	case "bytes":
		_, ok = v.([]byte)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s, the value is %s", ErrSchemaDescription, s.Kind, shapeOf(v))
	}
	return v, nil
}

// shapeOf names v's shape for errors (never its content).
func shapeOf(v any) string {
	switch x := v.(type) {
	case []any:
		return fmt.Sprintf("an array of %d", len(x))
	case map[string]any, map[any]any:
		return "a map"
	}
	return fmt.Sprintf("a %T", v)
}
