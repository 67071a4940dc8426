package debezium

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Mark is where a KafkaSource's topics ended at one moment: per partition, the offset the
// next record written there would get. Every change event on Kafka before the Mark was taken
// lies below it. Take one with KafkaSource.Mark and test it with KafkaSource.Reached: that is
// what `kura cdc --until-caught-up` waits for with this source (the PostgreSQL source's mark
// is the WAL position, its Backlog.Head).
type Mark struct {
	ends map[string]map[int32]int64 // topic -> partition -> end offset, partitions with records only
}

// String lists the partitions the Mark waits for, as topic/partition@end-offset.
func (m Mark) String() string {
	var parts []string
	for t, ps := range m.ends {
		for p, end := range ps {
			parts = append(parts, fmt.Sprintf("%s/%d@%d", t, p, end))
		}
	}
	if len(parts) == 0 {
		return "nothing to apply"
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// admin returns the Kafka client Backlog and Mark share, created at first use.
func (s *KafkaSource) admin() (*kadm.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.adminCl == nil {
		opts := append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOptions...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		s.adminCl = cl
	}
	return kadm.NewClient(s.adminCl), nil
}

// Mark reads the end offsets of the source's topics (Config.Topics, which must be names, not
// patterns: a pattern's topics are not known before the group joins). A partition without a
// record (its start offset equal to its end) needs nothing applied and is left out; a topic
// the broker does not know (Debezium creates a table's topic with its first event) likewise.
func (s *KafkaSource) Mark(ctx context.Context) (Mark, error) {
	if s.cfg.TopicRegex {
		return Mark{}, errors.New("debezium: a Mark needs the topics by name; Config.TopicRegex names patterns")
	}
	adm, err := s.admin()
	if err != nil {
		return Mark{}, err
	}
	start, err := adm.ListStartOffsets(ctx, s.cfg.Topics...)
	if err != nil {
		return Mark{}, fmt.Errorf("debezium: the topics' start offsets: %w", err)
	}
	end, err := adm.ListEndOffsets(ctx, s.cfg.Topics...)
	if err != nil {
		return Mark{}, fmt.Errorf("debezium: the topics' end offsets: %w", err)
	}
	m := Mark{ends: map[string]map[int32]int64{}}
	var perr error
	end.Each(func(o kadm.ListedOffset) {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return
		}
		st, ok := start.Lookup(o.Topic, o.Partition)
		switch {
		case o.Err != nil:
			perr = fmt.Errorf("debezium: the end offset of %s/%d: %w", o.Topic, o.Partition, o.Err)
		case !ok || st.Err != nil:
			perr = fmt.Errorf("debezium: no start offset for %s/%d", o.Topic, o.Partition)
		case o.Offset > st.Offset:
			if m.ends[o.Topic] == nil {
				m.ends[o.Topic] = map[int32]int64{}
			}
			m.ends[o.Topic][o.Partition] = o.Offset
		}
	})
	if perr != nil {
		return Mark{}, perr
	}
	return m, nil
}

// Reached reports whether the consumer group's committed offsets are at or past m on every
// partition m names: every record written before m was then applied on every target (the
// group commits a poll's offsets only after its invalidations landed), by this process or by
// another member of the group. A group that never committed has reached only an empty Mark.
// An error (the group coordinator not up yet, the broker down) means not known yet: ask again.
func (s *KafkaSource) Reached(ctx context.Context, m Mark) (bool, error) {
	if len(m.ends) == 0 {
		return true, nil
	}
	adm, err := s.admin()
	if err != nil {
		return false, err
	}
	offs, err := adm.FetchOffsets(ctx, s.cfg.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for t, ps := range m.ends {
		for p, end := range ps {
			o, ok := offs.Lookup(t, p)
			if !ok || o.Err != nil || o.At < end {
				return false, nil
			}
		}
	}
	return true, nil
}
