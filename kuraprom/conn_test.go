package kuraprom_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kuracache/kura/kuraprom"
	"github.com/kuracache/kura/store"
)

type fakeConn struct{ st store.ConnStats }

func (f fakeConn) ConnStats() store.ConnStats { return f.st }

func TestConnCollector(t *testing.T) {
	src := fakeConn{store.ConnStats{
		Connected: false, ConnectAttempts: 9, ConnectFailures: 8,
		Nodes: []store.NodeConnStats{
			{Addr: "cache.example:6379", Resolved: "127.0.0.2:6379", Dials: 3, DialFailures: 8, Reconnects: 1, Resolves: 11, ResolveFailures: 2, AddrChanges: 1},
			{Addr: "10.0.0.9:6379"},
		},
	}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(kuraprom.NewConnCollector("sessions", src))
	want := `
# HELP kura_store_connected 1 once the store has reached its servers (Redis: a seed answered; memcached: every server answered once), 0 before.
# TYPE kura_store_connected gauge
kura_store_connected{store="sessions"} 0
# HELP kura_store_connect_failures_total Background connection attempts that failed.
# TYPE kura_store_connect_failures_total counter
kura_store_connect_failures_total{store="sessions"} 8
# HELP kura_store_node_address_changes_total Connections whose address differed from the previous one's: the name moved.
# TYPE kura_store_node_address_changes_total counter
kura_store_node_address_changes_total{node="10.0.0.9:6379",store="sessions"} 0
kura_store_node_address_changes_total{node="cache.example:6379",store="sessions"} 1
# HELP kura_store_node_address_info 1 for the address the node's last connection used (its name resolved to resolved).
# TYPE kura_store_node_address_info gauge
kura_store_node_address_info{node="cache.example:6379",resolved="127.0.0.2:6379",store="sessions"} 1
# HELP kura_store_node_reconnects_total Connections opened to the node after a failed attempt (it came back).
# TYPE kura_store_node_reconnects_total counter
kura_store_node_reconnects_total{node="10.0.0.9:6379",store="sessions"} 0
kura_store_node_reconnects_total{node="cache.example:6379",store="sessions"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kura_store_connected", "kura_store_connect_failures_total",
		"kura_store_node_address_changes_total", "kura_store_node_address_info", "kura_store_node_reconnects_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "kura_store_node_resolves_total"); err != nil || n != 2 {
		t.Fatalf("kura_store_node_resolves_total series = %d, %v", n, err)
	}
}

func TestConnCollectorFailover(t *testing.T) {
	src := fakeConn{store.ConnStats{Connected: true, Primary: "10.0.0.2:6379", Failovers: 2, TrackingFlushes: 3, NotReplicated: 4, ReplicaReads: 5, SlotSplits: 6, OrphanedLeases: 7}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(kuraprom.NewConnCollector("sessions", src))
	want := `
# HELP kura_store_failovers_total Times the primary a store with failover follows changed (a replica was promoted).
# TYPE kura_store_failovers_total counter
kura_store_failovers_total{store="sessions"} 2
# HELP kura_store_invalidations_not_replicated_total Invalidations the primary applied that not enough replicas acknowledged in time (redisstore InvalidateWait).
# TYPE kura_store_invalidations_not_replicated_total counter
kura_store_invalidations_not_replicated_total{store="sessions"} 4
# HELP kura_store_orphaned_leases_released_total Leases whose Fill or Release got no answer (a broken connection), released in the background once the server answered again.
# TYPE kura_store_orphaned_leases_released_total counter
kura_store_orphaned_leases_released_total{store="sessions"} 7
# HELP kura_store_primary_info 1 for the server a store with failover (Redis Sentinel) follows now.
# TYPE kura_store_primary_info gauge
kura_store_primary_info{primary="10.0.0.2:6379",store="sessions"} 1
# HELP kura_store_replica_reads_total Commands sent to a replica (redisstore ReadFromReplicas).
# TYPE kura_store_replica_reads_total counter
kura_store_replica_reads_total{store="sessions"} 5
# HELP kura_store_slot_migration_splits_total Batches of several keys of one Redis Cluster slot that met TRYAGAIN while the slot was migrated, sent again one key per command.
# TYPE kura_store_slot_migration_splits_total counter
kura_store_slot_migration_splits_total{store="sessions"} 6
# HELP kura_store_tracking_flushes_total Times server-assisted invalidation had to drop every key (a tracking connection broke: failover, restart; FLUSHALL); each flushes the L1 of every Cache on the store.
# TYPE kura_store_tracking_flushes_total counter
kura_store_tracking_flushes_total{store="sessions"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kura_store_failovers_total",
		"kura_store_invalidations_not_replicated_total", "kura_store_orphaned_leases_released_total", "kura_store_primary_info", "kura_store_replica_reads_total", "kura_store_slot_migration_splits_total", "kura_store_tracking_flushes_total"); err != nil {
		t.Fatal(err)
	}
}
