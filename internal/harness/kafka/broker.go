package kafka

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokerConfig configures a private KRaft broker. The zero value is a one-node cluster tuned for
// tests: one partition per auto-created topic, replication factor 1, no initial rebalance delay,
// and group session timeouts allowed down to 500 ms (so a test's consumer that dies is noticed
// in about a second instead of 45).
type BrokerConfig struct {
	// Heap is the JVM's -Xmx ("" means Heap).
	Heap string
	// Partitions is num.partitions, the partition count of auto-created topics (0 means 1).
	Partitions int
	// Props are extra server.properties settings, applied last.
	Props map[string]string
	// StartTimeout bounds the start (0 means 90 s: a JVM start on a loaded 2-core machine).
	StartTimeout time.Duration
}

// Broker is a running private Kafka node.
type Broker struct {
	// Addr is the broker's host:port on loopback, for clients (bootstrap.servers).
	Addr string
	// Dir is the private directory (properties, log dirs, the JVM's log), removed by Stop.
	Dir string
	// Build is the Java build the broker runs from.
	Build *Build
	// StartTook is how long the last start took, JVM launch to the first answered metadata request.
	StartTook time.Duration

	cfg BrokerConfig
	j   *jvm
}

// StartBroker compiles the Java side if needed (see Compile), formats a fresh KRaft log
// directory and starts a broker+controller on two free loopback ports, returning once a client's
// metadata request is answered.
func StartBroker(ctx context.Context, cfg BrokerConfig) (*Broker, error) {
	build, err := Compile(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kura-kafka-")
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		b, err := startBrokerIn(ctx, dir, build, cfg)
		if err == nil {
			return b, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		// A port taken between FreePort and the bind: start over in a clean directory.
		os.RemoveAll(dir)
		if dir, err = os.MkdirTemp("", "kura-kafka-"); err != nil {
			return nil, err
		}
	}
	os.RemoveAll(dir)
	return nil, last
}

func startBrokerIn(ctx context.Context, dir string, build *Build, cfg BrokerConfig) (*Broker, error) {
	bport, err := FreePort()
	if err != nil {
		return nil, err
	}
	cport, err := FreePort()
	if err != nil {
		return nil, err
	}
	if cport == bport {
		return nil, fmt.Errorf("kafka harness: got the same free port twice")
	}
	addr := net.JoinHostPort("127.0.0.1", itoa(bport))
	caddr := net.JoinHostPort("127.0.0.1", itoa(cport))
	logs := filepath.Join(dir, "logs")
	partitions := cfg.Partitions
	if partitions <= 0 {
		partitions = 1
	}
	props := map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          "1",
		"controller.quorum.voters":                         "1@" + caddr,
		"listeners":                                        "PLAINTEXT://" + addr + ",CONTROLLER://" + caddr,
		"advertised.listeners":                             "PLAINTEXT://" + addr,
		"controller.listener.names":                        "CONTROLLER",
		"inter.broker.listener.name":                       "PLAINTEXT",
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                                         logs,
		"num.partitions":                                   itoa(partitions),
		"auto.create.topics.enable":                        "true",
		"offsets.topic.replication.factor":                 "1",
		"offsets.topic.num.partitions":                     "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"transaction.state.log.num.partitions":             "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
		"group.min.session.timeout.ms":                     "500",
		"group.consumer.min.session.timeout.ms":            "500",
		"group.consumer.min.heartbeat.interval.ms":         "100",
		"log.flush.interval.messages":                      "9223372036854775807",
		"num.network.threads":                              "2",
		"num.io.threads":                                   "2",
		"background.threads":                               "2",
		"num.recovery.threads.per.data.dir":                "1",
	}
	for k, v := range cfg.Props {
		props[k] = v
	}
	propsPath := filepath.Join(dir, "server.properties")
	if err := writeProps(propsPath, props, nil); err != nil {
		return nil, err
	}
	args, err := jvmArgs(cfg.Heap, dir)
	if err != nil {
		return nil, err
	}
	j := &jvm{name: "kafka broker", dir: dir, logPath: filepath.Join(dir, "broker.log")}
	j.args = append(args, "-cp", build.Classpath, "dev.kura.harness.Broker",
		propsPath, logs, "kura-test-cluster-0001")
	b := &Broker{Addr: addr, Dir: dir, Build: build, cfg: cfg, j: j}
	if err := b.launch(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// launch starts the JVM and waits until the broker answers.
func (b *Broker) launch(ctx context.Context) error {
	start := time.Now()
	if err := b.j.launch(); err != nil {
		return err
	}
	limit := b.cfg.StartTimeout
	if limit <= 0 {
		limit = 90 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DialTimeout(time.Second))
	if err != nil {
		b.j.kill()
		return err
	}
	defer cl.Close()
	var last error
	for {
		if b.j.exited() {
			return fmt.Errorf("kafka broker on %s exited during start-up:\n%s", b.Addr, b.j.Log())
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(pctx, cl)
		pcancel()
		if last == nil {
			b.StartTook = time.Since(start)
			return nil
		}
		select {
		case <-ctx.Done():
			b.j.kill()
			return fmt.Errorf("kafka broker on %s not ready after %v: %v\n%s", b.Addr, limit, last, b.j.Log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ready answers nil once the broker lists itself in a metadata response and has an active
// controller (so topic creation and group coordination work).
func ready(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	m, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	if len(m.Brokers) == 0 || m.Controller < 0 {
		return fmt.Errorf("no broker or controller in metadata yet")
	}
	return nil
}

// Log returns the tail of the broker's log, for error messages.
func (b *Broker) Log() string { return b.j.Log() }

// Kill ends the broker at once with SIGKILL, as a crash would. Restart brings it back.
func (b *Broker) Kill() { b.j.kill() }

// Restart kills the broker if it runs and starts it again on the same ports and log directory
// (what it had written survives, as a real broker's disk would), returning once it answers.
func (b *Broker) Restart(ctx context.Context) error {
	b.j.kill()
	return b.launch(ctx)
}

// Stop ends the broker and removes its directory. It is safe to call more than once.
func (b *Broker) Stop() {
	b.j.stop(5 * time.Second)
	_ = os.RemoveAll(b.Dir)
}

// Client returns a franz-go client seeded with the broker, with the given extra options. The
// caller closes it.
func (b *Broker) Client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
}

// CreateTopic creates a topic with the given partition count (replication factor 1).
func (b *Broker) CreateTopic(ctx context.Context, topic string, partitions int) error {
	cl, err := b.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err != nil {
		return fmt.Errorf("kafka harness: create topic %q: %w", topic, err)
	}
	if resp.Err != nil {
		return fmt.Errorf("kafka harness: create topic %q: %w", topic, resp.Err)
	}
	return nil
}
