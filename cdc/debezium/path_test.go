package debezium

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kuracache/kura/cdc/internal/cdctest"
	"github.com/kuracache/kura/internal/harness/kafka"
	"github.com/kuracache/kura/internal/harness/servers"
)

// requireDebezium skips a test of the whole path (PostgreSQL -> Debezium -> Kafka -> kura)
// unless KURA_DEBEZIUM=1 or make soak (KURA_SOAK) asks for it: a Debezium JVM start costs
// 5-20 s on a loaded 2-core machine, beyond what make test spends on this package.
func requireDebezium(t *testing.T) {
	t.Helper()
	if !kafka.Soak() && os.Getenv("KURA_DEBEZIUM") == "" {
		t.Skip("the Debezium path runs under KURA_SOAK=1 (make soak) or KURA_DEBEZIUM=1")
	}
}

// dbzPath is a private PostgreSQL whose table name(id bigint PRIMARY KEY, v bigint) Debezium's
// PostgreSQL connector streams into the package's broker, topic Topic.
type dbzPath struct {
	B     *kafka.Broker
	PG    *servers.Postgres
	Pool  *pgxpool.Pool
	Eng   *kafka.Engine
	Name  string // the table (in schema public), the topic prefix, the slot
	Table string // "public." + Name
	Topic string
}

// startPath starts the path with keys rows (v = nextval of the sequence Name_ver, so every
// write's v is unique), REPLICA IDENTITY FULL, and a topic of partitions partitions.
func startPath(t *testing.T, name string, keys, partitions int, pgArgs ...string) *dbzPath {
	t.Helper()
	requireDebezium(t)
	b := broker(t)
	pg, pool := cdctest.StartPostgres(t, pgArgs,
		fmt.Sprintf("CREATE SEQUENCE %s_ver", name),
		fmt.Sprintf("CREATE TABLE %s (id bigint PRIMARY KEY, v bigint NOT NULL)", name),
		fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL", name),
		fmt.Sprintf("INSERT INTO %s SELECT g, nextval('%[1]s_ver') FROM generate_series(1, %d) g", name, keys))
	p := &dbzPath{B: b, PG: pg, Pool: pool, Name: name, Table: "public." + name, Topic: name + ".public." + name}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.CreateTopic(ctx, p.Topic, partitions); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(pg.Addr)
	portN, _ := strconv.Atoi(port)
	p.Eng = kafka.EngineT(t, kafka.EngineConfig{Broker: b.Addr, Props: kafka.PostgresProps(kafka.PostgresSource{
		Host: host, Port: portN, User: "kura", Password: "unused_trust_auth", Database: "postgres",
		Tables: p.Table, Prefix: name, Slot: name, Publication: name + "_pub"})})
	return p
}

// update sets key id's v to the sequence's next value and returns it.
func (p *dbzPath) update(ctx context.Context, id int64) (int64, error) {
	var v int64
	err := p.Pool.QueryRow(ctx, "UPDATE "+p.Name+" SET v = nextval('"+p.Name+"_ver') WHERE id = $1 RETURNING v", id).Scan(&v)
	return v, err
}

// load is the readers' loader: the row's v from PostgreSQL.
func (p *dbzPath) load(ctx context.Context, id int64) (int64, error) {
	var v int64
	err := p.Pool.QueryRow(ctx, "SELECT v FROM "+p.Name+" WHERE id = $1", id).Scan(&v)
	return v, err
}
